"""Agent specs → factories. `load_agent(spec)()` gives a fresh agent for one run.

- `reference:NAME` — built-in scripted baselines;
- `python:PATH.py:NAME` or `python:module:NAME` — a callable or a class (instantiated per run);
- `openai:MODEL` — a model behind an OpenAI-compatible endpoint.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.agents.protocol import Agent
from assay.errors import BadInput
from assay.canonical import canonical_hash

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

    def __call__(self) -> Agent:
        return self.make()

    def size_pool(self, concurrency: int) -> None:
        """Announce how many runs will be in flight at once (sizes a shared connection pool)."""
        if self.endpoint is not None:
            self.endpoint.size_pool(concurrency)

    async def aclose(self) -> None:
        """Release what the running event loop's runs shared (its endpoint client)."""
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
               temperature: float = 0.0) -> AgentFactory:
    kind, _, rest = spec.partition(":")
    if not rest:
        raise BadInput(f"agent spec '{spec}' must look like reference:NAME, python:FILE.py:NAME or openai:MODEL", WHERE)
    if kind == "reference":
        from assay.agents.reference import reference_factory

        cls = reference_factory(rest)
        return AgentFactory(spec, cls, {"kind": "reference", "name": rest})
    if kind == "python":
        return _python(spec, rest)
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


def _python(spec: str, rest: str) -> AgentFactory:
    target, sep, name = rest.rpartition(":")
    if not sep or not target or not name:
        raise BadInput(f"'{spec}' must be python:PATH.py:NAME or python:module:NAME", WHERE)
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise BadInput(f"no such file '{target}'", WHERE)
        source = path.read_bytes()
        mod_name = "assay_agent_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
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
    answer = getattr(obj, "__call__", None) if inspect.isclass(obj) else obj
    is_async = inspect.iscoroutinefunction(answer) or inspect.iscoroutinefunction(getattr(answer, "__call__", None))
    portable = f"python:{Path(target).resolve()}:{name}" if target.endswith(".py") else spec
    return AgentFactory(spec, make, {"kind": "python", "code_sha256": code_hash}, is_async=is_async,
                        portable_spec=portable)
