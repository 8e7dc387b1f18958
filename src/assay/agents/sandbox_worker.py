"""The agent worker: plays a `python:` agent, one turn at a time, for the harness that started it.

This file runs inside the agent's sandbox (`assay.agents.sandbox`), with nothing of Assay around
it: it imports the standard library only, and is the one file of the package the sandbox shows.
It is started as `python -I worker.py CONFIG` (CONFIG: JSON naming the agent and the memory limit)
and talks newline-delimited JSON over the pipes it was started with, which it moves off fds 0 and 1
before anything else runs: the agent's stdout (Python's and the C library's) goes to stderr, so an
agent that prints never disturbs the protocol.

    harness → worker   {"op": "turn", "seq": N, "run": R, "base": B, "new": [...], "tools": [...]}
                       {"op": "end"}                    the run is over (a class agent's instance goes)
    worker → harness   {"ready": true, "class": bool} | {"load_error": "..."}     once, at start
                       {"seq": N, "reply": MESSAGE}
                       {"seq": N, "raised": {"type", "message", "traceback"}}    the agent raised
                       {"seq": N, "create_failed": {"type", "message", "traceback"}}

A turn carries only the messages the worker has not seen in this run (`base`: how many it holds),
and the tools on a run's first turn: the conversation is not sent again each turn. The agent gets
its own copy of the conversation each turn, and the run's one list of tools, as in process.
A class agent is instantiated on the first turn of each run (`run` changes), as in-process. An
async agent's coroutine is run to its end on the worker's own event loop (one per worker, so a
client the agent keeps between turns stays on one loop). The worker never sees a world, a
scenario, a seed or a store: only the conversation the agent is shown.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import resource
import sys
import traceback

TYPE_CHECKING = False  # the type checker's names, imported by it alone (nothing more to load here)
if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from io import BufferedReader, BufferedWriter
    from typing import Any, TypeAlias, Union

    #: what the worker sends of an agent's answer: JSON values
    Json: TypeAlias = Union[None, str, bool, int, float, list["Json"], dict[str, "Json"]]

TRACEBACK_CHARS = 8000


def _protocol_fds() -> tuple[BufferedReader, BufferedWriter]:
    """Keep the protocol pipes on fresh fds; point fd 0 at /dev/null and fd 1 at stderr."""
    proto_in, proto_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - for the process's life
    sys.stdout = sys.stderr
    return os.fdopen(proto_in, "rb"), os.fdopen(proto_out, "wb")


def _die_with_parent() -> None:
    """Without bubblewrap's --die-with-parent: be killed when the harness dies (Linux prctl)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except Exception:  # noqa: BLE001 - best effort; EOF on the pipe ends an idle worker anyway
        pass


def _limit_memory(limit: int) -> None:
    if limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _load(config: dict[str, Any]) -> Callable[..., Any]:
    for entry in reversed(config.get("paths") or []):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    for entry in config.get("paths_last") or []:
        if entry not in sys.path:
            sys.path.append(entry)
    if config.get("file"):
        spec = importlib.util.spec_from_file_location("assay_agent", config["file"])
        if spec is None or spec.loader is None:  # not a file Python loads as a module
            raise ImportError(f"cannot load '{config['file']}' as a module")
        module = importlib.util.module_from_spec(spec)
        sys.modules["assay_agent"] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(config["module"])
    obj = getattr(module, config["attr"], None)
    if obj is None:
        raise LookupError(f"has no attribute '{config['attr']}'")
    if not callable(obj):
        raise LookupError(f"'{config['attr']}' is not callable")
    return obj


def _plain(value: object, depth: int = 0) -> Json:
    """The agent's answer as JSON values, without judging it (the harness does): dicts, lists and
    scalars as they are; a message object (an API client's) as its fields."""
    if depth > 64:
        return None
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, depth + 1) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return _plain(dump(), depth + 1)
        except Exception:  # noqa: BLE001 - then read it as an object
            pass
    if isinstance(value, (tuple, bytes, bytearray, set)):
        return {"__not_message__": type(value).__name__}
    fields = ("role", "content", "tool_calls", "id", "type", "function", "name", "arguments")
    return {f: _plain(getattr(value, f), depth + 1) for f in fields if hasattr(value, f)}


def _reply(raw: object) -> Json:
    if isinstance(raw, (tuple, bytes, bytearray)):
        return {"__not_message__": type(raw).__name__}
    return _plain(raw)


async def _awaited(awaitable: Awaitable[object]) -> object:
    return await awaitable


def _copy(message: dict[str, Any]) -> dict[str, Any]:
    """The agent's own copy of a message (the engine's: strings, and tool calls of a known shape)."""
    copy = dict(message)
    calls = copy.get("tool_calls")
    if isinstance(calls, list):
        copy["tool_calls"] = [{**c, "function": dict(c["function"])} if isinstance(c, dict) and
                              isinstance(c.get("function"), dict) else c for c in calls]
    return copy


def _failure(exc: BaseException) -> dict[str, str]:
    text = "".join(traceback.format_exception(exc))
    return {"type": type(exc).__name__, "message": str(exc), "traceback": text[-TRACEBACK_CHARS:]}


def _send(out: BufferedWriter, frame: dict[str, Any]) -> None:
    out.write(json.dumps(frame, default=str).encode("utf-8") + b"\n")
    out.flush()


def main() -> None:
    config = json.loads(sys.argv[1])
    inbox, out = _protocol_fds()
    if config.get("die_with_parent"):
        _die_with_parent()
    try:
        _limit_memory(int(config.get("memory") or 0))
        obj = _load(config)
    except BaseException as exc:  # noqa: BLE001 - told to the harness, which refuses the agent
        _send(out, {"load_error": f"{type(exc).__name__}: {exc}"})
        return
    is_class = isinstance(obj, type)
    _send(out, {"ready": True, "class": is_class})
    loop = None  # an async agent's: made at its first coroutine (asyncio costs a fifth of a second)
    run: str | None = None
    agent: Callable[..., Any] | None = None  # the agent is user code: its answer is whatever it returns
    history: list[dict[str, Any]] = []
    tools: list[Any] = []
    for line in inbox:
        frame = json.loads(line)
        if frame.get("op") == "end":
            run, agent, history, tools = None, None, [], []
            continue
        seq = frame["seq"]
        if frame["run"] != run:
            run, agent, history, tools = frame["run"], None, [], frame.get("tools") or []
            try:
                agent = obj() if is_class else obj
            except Exception as exc:  # noqa: BLE001 - the agent's fault: its run is crashed
                run = None
                _send(out, {"seq": seq, "create_failed": _failure(exc)})
                continue
        if frame.get("base") != len(history):  # the harness's bookkeeping, never the agent's
            _send(out, {"seq": seq, "out_of_step": len(history)})
            continue
        history.extend(frame.get("new") or [])
        try:
            assert agent is not None  # made on the run's first turn (above), or that turn was refused
            raw = agent([_copy(m) for m in history], tools)
            if hasattr(type(raw), "__await__"):
                if loop is None:
                    import asyncio

                    loop = asyncio.new_event_loop()
                raw = loop.run_until_complete(_awaited(raw))
            answer = {"seq": seq, "reply": _reply(raw)}
        except Exception as exc:  # noqa: BLE001 - the agent's fault: its run is crashed
            answer = {"seq": seq, "raised": _failure(exc)}
        _send(out, answer)


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, ConnectionResetError, KeyboardInterrupt):
        # the harness went away (stopped, interrupted or killed) while this worker wrote to it or
        # waited: nobody is left to tell, and a traceback on the shared stderr would read as the
        # harness's own (`assay run` interrupted must say one line)
        os._exit(0)
