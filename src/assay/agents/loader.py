"""Agent specs → factories. `load_agent(spec)()` gives a fresh agent for one run.

- `reference:NAME` — built-in scripted baselines (played in this process);
- `python:PATH.py:NAME` or `python:module:NAME` — a callable or a class (instantiated per run),
  the user's code: played by a pool of sandboxed worker processes (`agents/sandbox.py`), never
  imported here; `in_process=True` imports and plays it here instead, to debug an agent (such a
  batch is marked in its agent options and can never be submitted);
- `openai:MODEL` — a model behind an OpenAI-compatible endpoint (played in this process).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from assay.agents.protocol import Agent
from assay.errors import BadInput
from assay.canonical import canonical_hash

if TYPE_CHECKING:  # imported where used: the sandbox is loaded only when an agent is
    from assay.agents import sandbox

WHERE = "--agent"


@dataclass(frozen=True)
class AgentFactory:
    """Gives a fresh agent per run, and says what configuration it stands for.

    `is_async` says whether its agents answer with awaitables (the executors pick their default
    by it); `options` are what `load_agent` was given besides the spec, so another process (a Ray
    worker) can load the same agent — never the API key, which a worker reads from its own
    environment; `endpoint` is the connection pool its runs share, when it has one.
    """

    spec: str
    make: Any
    config: dict[str, Any] = field(default_factory=dict)
    is_async: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    endpoint: Any = None
    #: the spec another process loads it by (a python file's path made absolute)
    portable_spec: str | None = None
    #: where its agents run: "builtin" (this process: reference and openai agents), "sandbox"
    #: (bubblewrap), "subprocess" (a plain worker process: bwrap is missing), "in_process" (here)
    isolation: str = "builtin"
    #: the sandboxed workers of a `python:` agent (`sandbox.Pool`), None otherwise
    pool: Any = None

    def __call__(self) -> Agent:
        return self.make()

    def close(self) -> None:
        """Stop the agent's worker processes (a later run starts new ones)."""
        if self.pool is not None:
            self.pool.close()

    def size_pool(self, concurrency: int) -> None:
        """Announce how many runs will be in flight at once (sizes a shared connection pool)."""
        if self.endpoint is not None:
            self.endpoint.size_pool(concurrency)

    async def aclose(self) -> None:
        """Release what the running event loop's runs shared (its endpoint client, its workers)."""
        self.close()
        if self.endpoint is not None:
            await self.endpoint.aclose()

    @property
    def config_signature(self) -> str:
        """SHA-256 of the canonical agent configuration (never secrets)."""
        return canonical_hash({"spec": self.spec, **self.config})

    @property
    def default_label(self) -> str:
        return self.spec.split(":", 1)[1] if ":" in self.spec else self.spec


def load_agent(spec: str, *, base_url: str | None = None, api_key: str | None = None,
               temperature: float = 0.0, in_process: bool = False, agent_env: Sequence[str] = (),
               agent_memory: int | None = None) -> AgentFactory:
    """The factory of `spec`'s agents. `in_process`, `agent_env` (names of environment variables
    a sandboxed agent gets) and `agent_memory` (its address-space limit, bytes) concern `python:`
    agents only; they are kept in the factory's `options` when not the defaults (never values)."""
    kind, _, rest = spec.partition(":")
    if not rest:
        raise BadInput(f"agent spec '{spec}' must look like reference:NAME, python:FILE.py:NAME or openai:MODEL", WHERE)
    if kind == "reference":
        from assay.agents.reference import reference_factory

        cls = reference_factory(rest)
        return AgentFactory(spec, cls, {"kind": "reference", "name": rest})
    if kind == "python":
        return _python(spec, rest, in_process=in_process, agent_env=tuple(agent_env), agent_memory=agent_memory)
    if kind == "openai":
        from assay.agents.openai_agent import OpenAIAgent, open_endpoint

        endpoint = open_endpoint(rest, base_url=base_url, api_key=api_key)
        probe = OpenAIAgent(rest, temperature=temperature, endpoint=endpoint)
        return AgentFactory(
            spec, lambda: OpenAIAgent(rest, temperature=temperature, endpoint=endpoint),
            {"kind": "openai", **probe.config()}, is_async=True,
            options={"base_url": base_url, "temperature": temperature}, endpoint=endpoint)
    raise BadInput(f"unknown agent kind '{kind}' in '{spec}' (known: reference, python, openai)", WHERE)


def _search_working_directory() -> None:
    """Let `python:module:NAME` find a module in the current directory, as `python -m` would.

    The `assay` console script starts with its own directory on `sys.path`, not the one it was run
    from. The directory goes last, so a file there never shadows an installed module."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)
        importlib.invalidate_caches()


def _split(spec: str, rest: str) -> tuple[str, str]:
    target, sep, name = rest.rpartition(":")
    if not sep or not target or not name:
        raise BadInput(f"'{spec}' must be python:PATH.py:NAME or python:module:NAME", WHERE)
    return target, name


def _python(spec: str, rest: str, *, in_process: bool, agent_env: tuple[str, ...],
            agent_memory: int | None) -> AgentFactory:
    """A `python:` agent: sandboxed (or, without bwrap, a plain worker process), or in process."""
    from assay.agents import sandbox

    target, name = _split(spec, rest)
    for var in agent_env:
        if not var or "=" in var or "\0" in var:
            raise BadInput(f"'{var}' is not the name of an environment variable", "--agent-env")
    memory = sandbox.DEFAULT_MEMORY if agent_memory is None else agent_memory
    if memory < MIN_MEMORY:
        raise BadInput(f"must be at least {MIN_MEMORY // 2**20} MiB", "--agent-memory")
    options: dict[str, Any] = {}
    if agent_env:
        options["agent_env"] = list(agent_env)
    if agent_memory is not None and agent_memory != sandbox.DEFAULT_MEMORY:
        options["agent_memory"] = agent_memory
    if in_process:
        factory = _in_process(spec, target, name)
        return dataclasses.replace(factory, options={**options, "in_process": True}, isolation="in_process")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise BadInput(f"no such file '{target}'", WHERE)
        file = path.resolve()
        code_hash = hashlib.sha256(file.read_bytes()).hexdigest()
        located = sandbox.Target(attr=name, item=file, home=file.parent, file=file)
    else:
        origin, located = _locate_module(target, name)
        code_hash = hashlib.sha256(origin.read_bytes()).hexdigest() if origin is not None else ""
    bwrap = sandbox.find_bwrap()
    pool = sandbox.Pool(sandbox.Launch(located, memory=memory, env_names=agent_env, bwrap=bwrap))
    try:
        sandbox.probe(pool)
    except sandbox.SandboxFailed as exc:
        raise BadInput(_load_refusal(target, name, str(exc)), WHERE) from None
    except (sandbox.AgentDied, sandbox.AgentGarbage) as exc:  # bwrap (or the interpreter) would not start
        raise BadInput(f"could not start the agent's {'sandbox' if bwrap else 'process'}: {exc}", WHERE) from None
    portable = f"python:{file}:{name}" if target.endswith(".py") else spec
    return AgentFactory(spec, lambda: sandbox.SandboxedAgent(pool), {"kind": "python", "code_sha256": code_hash},
                        is_async=True, options=options, portable_spec=portable,
                        isolation="sandbox" if bwrap else "subprocess", pool=pool)


#: The least `--agent-memory` an interpreter can start in.
MIN_MEMORY = 64 * 2**20


def _load_refusal(target: str, name: str, error: str) -> str:
    """What the worker could not load, in the words loading in process used."""
    if error == f"LookupError: has no attribute '{name}'":
        return f"'{target}' has no attribute '{name}'"
    if error == f"LookupError: '{name}' is not callable":
        return f"'{target}:{name}' is not callable"
    if target.endswith(".py"):
        return f"could not load '{target}': {error}"
    return f"could not import module '{target}': {error}"


def _locate_module(target: str, name: str) -> tuple[Path | None, sandbox.Target]:
    """Find `python:module:NAME`'s module without importing it (importing runs its code here):
    its file, and the sandbox's view of it (its top-level package or file, and the directory on
    the search path it was found in, this directory last, as `python -m` from here would)."""
    from importlib.machinery import PathFinder

    from assay.agents import sandbox

    here = os.getcwd()
    search = [p or here for p in sys.path] + [here]
    parts = target.split(".")
    if not all(p.isidentifier() for p in parts):
        raise BadInput(f"could not import module '{target}': not a module name", WHERE)
    found = PathFinder.find_spec(parts[0], search)
    if found is None:
        raise BadInput(f"could not import module '{target}': ModuleNotFoundError: No module named "
                       f"'{parts[0]}'", WHERE)
    locations = list(found.submodule_search_locations or [])
    item = Path(locations[0]) if locations else Path(str(found.origin))
    spec = found
    for i in range(1, len(parts)):
        sub = PathFinder.find_spec(".".join(parts[:i + 1]), locations) if locations else None
        if sub is None:
            raise BadInput(f"could not import module '{target}': ModuleNotFoundError: No module named "
                           f"'{'.'.join(parts[:i + 1])}'", WHERE)
        spec = sub
        locations = list(spec.submodule_search_locations or [])
    origin = Path(spec.origin) if spec.origin and spec.has_location else None
    item = item.resolve()
    return origin, sandbox.Target(attr=name, item=item, home=item.parent, module=target)


def _in_process(spec: str, target: str, name: str) -> AgentFactory:
    """The agent imported and played in this process (`--in-process`: for debugging an agent)."""
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise BadInput(f"no such file '{target}'", WHERE)
        source = path.read_bytes()
        mod_name = "assay_agent_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
        home = str(path.resolve().parent)  # sibling modules import, as in the sandbox (last: never shadowing)
        if home not in sys.path:
            sys.path.append(home)
        try:
            module_spec = importlib.util.spec_from_file_location(mod_name, path)
            assert module_spec is not None and module_spec.loader is not None
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[mod_name] = module
            module_spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - the user's file; report, don't trace
            raise BadInput(f"could not load '{target}': {type(exc).__name__}: {exc}", WHERE) from None
        code_hash = hashlib.sha256(source).hexdigest()
    else:
        _search_working_directory()
        try:
            module = importlib.import_module(target)
        except Exception as exc:  # noqa: BLE001
            raise BadInput(f"could not import module '{target}': {type(exc).__name__}: {exc}", WHERE) from None
        file = getattr(module, "__file__", None)
        code_hash = hashlib.sha256(Path(file).read_bytes()).hexdigest() if file else ""
    obj = getattr(module, name, None)
    if obj is None:
        raise BadInput(f"'{target}' has no attribute '{name}'", WHERE)
    if not callable(obj):
        raise BadInput(f"'{target}:{name}' is not callable", WHERE)
    make = obj if inspect.isclass(obj) else (lambda: obj)
    # the `__call__` method itself (not a callability test): is it a coroutine function?
    answer = getattr(obj, "__call__", None) if inspect.isclass(obj) else obj  # noqa: B004
    is_async = inspect.iscoroutinefunction(answer) or inspect.iscoroutinefunction(getattr(answer, "__call__", None))  # noqa: B004
    portable = f"python:{Path(target).resolve()}:{name}" if target.endswith(".py") else spec
    return AgentFactory(spec, make, {"kind": "python", "code_sha256": code_hash}, is_async=is_async,
                        portable_spec=portable)
