"""Drivers play an agent over the episode engine; there is no other copy of the loop.

- `play_sync`: in-process, one thread. A sync agent is called directly; an async one is run on
  this thread's own event loop, bounded by the time the run has left.
- `play_async`: inside an event loop. An async agent is awaited under `asyncio.timeout`, so an
  overstaying agent is cancelled, not abandoned; a sync agent is called inline (scripted agents
  keep their speed; a sync agent that blocks holds up the loop — use the threads executor).
- `replay`: the same engine fed the replies a run recorded.

What the agent does wrong is the agent's fault, recorded in the run's status: raising is `crashed`,
overstaying is `timeout`, an endpoint that cannot be reached after its client's retries is `error`
(the harness could not ask the agent, the agent did not fail).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from assay.agents.protocol import Unreachable
from assay.records import RunRecord
from assay.run.engine import Done, Episode, Turn

Agent = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Any]


def _crash(episode: Episode, exc: BaseException) -> Done:
    if isinstance(exc, Unreachable):
        return episode.fail("error", f"agent endpoint unreachable: {exc}")
    return episode.fail("crashed", f"agent raised {type(exc).__name__}: {exc}")


def _create(episode: Episode, make_agent: Callable[[], Agent]) -> Agent | Done:
    try:
        return make_agent()
    except Exception as exc:  # noqa: BLE001 - the agent's fault, recorded, never raised
        return episode.fail("crashed", f"agent could not be created: {type(exc).__name__}: {exc}")


_thread_loops = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop = getattr(_thread_loops, "loop", None)
    if loop is None or loop.is_closed():
        loop = _thread_loops.loop = asyncio.new_event_loop()
    return loop


async def _play(episode: Episode, make_agent: Callable[[], Agent],
                wait: Callable[[Any, float], Awaitable[Any]]) -> RunRecord:
    """The one loop: ask, report, until the engine says Done. `wait(awaitable, seconds)` is how
    this driver waits for an async agent's answer within the run's remaining time."""
    out: Turn | Done = episode.start()
    agent = out if isinstance(out, Done) else _create(episode, make_agent)
    if isinstance(agent, Done):
        return agent.record
    clock = time.perf_counter
    while isinstance(out, Turn):
        began = clock()
        try:
            raw = agent(out.messages, out.tools)
            if inspect.isawaitable(raw):
                raw = await wait(raw, max(0.001, episode.time_left))
        except TimeoutError:
            out = episode.timeout()
            break
        except Exception as exc:  # noqa: BLE001
            out = _crash(episode, exc)
            break
        out = episode.step(raw, clock() - began)
    return out.record


async def _bounded(awaitable: Any, seconds: float) -> Any:
    async with asyncio.timeout(seconds):
        return await awaitable


async def _on_thread_loop(awaitable: Any, seconds: float) -> Any:
    # never suspends the driver: the agent's awaitable runs to its end on this thread's own loop
    return _thread_loop().run_until_complete(_bounded(awaitable, seconds))


def play_sync(episode: Episode, make_agent: Callable[[], Agent]) -> RunRecord:
    """Play one run to its end on this thread (no event loop unless the agent is async)."""
    coro = _play(episode, make_agent, _on_thread_loop)
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("the sync driver was suspended")  # pragma: no cover - _play awaits only _on_thread_loop


async def play_async(episode: Episode, make_agent: Callable[[], Agent]) -> RunRecord:
    """Play one run to its end as a task of the running event loop."""
    return await _play(episode, make_agent, _bounded)


def replay(episode: Episode, actions: Iterable[dict[str, Any]]) -> Episode:
    """Feed a run's recorded actions to a fresh episode; stop at the end of the run or of the
    record. The episode is returned as it stands (its world holds the replayed final state)."""
    out = episode.start()
    for action in actions:
        if isinstance(out, Done):
            break
        out = episode.step(action)
    return episode
