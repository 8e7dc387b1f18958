"""Drivers play an agent over the episode engine; there is no other copy of the loop.

- `play_sync`: in-process, one thread. A sync agent is called directly; an async one is run on
  this thread's own event loop, bounded by the time the run has left.
- `play_async`: inside an event loop. An async agent is awaited under `asyncio.timeout`, so an
  overstaying agent is cancelled, not abandoned; a sync agent is called inline (scripted agents
  keep their speed; a sync agent that blocks holds up the loop — use the threads executor). A
  world that says its steps block (`blocking`, e.g. a campaign whose facilitator is a model) is
  opened and stepped on a worker thread, so the loop keeps the other runs moving meanwhile.
- `Stepper`: the HTTP driver. The same loop, suspended where it waits for the agent and advanced
  from outside one assistant message at a time (one per request); what it is fed again on a fresh
  fork (the steps a run recorded) brings it back to where it was, so a restarted server resumes.
- `replay`: the same engine fed the replies a run recorded.

What the agent does wrong is the agent's fault, recorded in the run's status: raising is `crashed`,
overstaying is `timeout`, an endpoint that cannot be reached after its client's retries is `error`
(the harness could not ask the agent, the agent did not fail). A sandboxed agent (`agents/sandbox.py`)
is the same: what it raised in its process comes back as `crashed` with its traceback, a process
that dies mid-turn is `crashed`, one that answers what is not the protocol `empty`, one that cannot
be started `error`. Such an agent has `aopen` (take a worker, before its time starts) and `close`
(give it back when the run ends), which the loop calls.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any, TypeVar

from assay.agents import sandbox
from assay.agents.protocol import Unreachable
from assay.records import ChatMessage, RunRecord, storable
from assay.run.engine import Done, Episode, Turn

Agent = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Any]
_T = TypeVar("_T")
#: How an async driver runs a blocking call off its event loop: `await offload(call)` is `call()`.
Offload = Callable[[Callable[[], _T]], Awaitable[_T]]


def blocks(episode: Episode) -> bool:
    """Whether the episode's world says its `reset` and `step` may block (on a model, say): the
    World protocol's `blocking` (False by `WorldDefaults`)."""
    return bool(episode.world.blocking)


#: The end of an agent's traceback that a crashed run keeps (its innermost frames matter most).
TRACEBACK_CHARS = 8000


def _traceback(exc: BaseException) -> str:
    """The agent's traceback as text, cut to its last `TRACEBACK_CHARS`, storable as it is."""
    text = "".join(traceback.format_exception(exc))
    return storable(text[-TRACEBACK_CHARS:])


def _crash(episode: Episode, exc: BaseException) -> Done:
    if isinstance(exc, Unreachable):  # the harness could not ask: no traceback of the agent's
        text = str(exc)  # one line naming the endpoint and the cause, when the adapter says so
        return episode.fail("error", text if text.startswith("agent endpoint ") else f"agent endpoint unreachable: {text}")
    if isinstance(exc, sandbox.AgentRaised):  # raised in its own process: its words, its traceback
        what = "agent could not be created: " if exc.creating else "agent raised "
        return episode.fail("crashed", f"{what}{exc.type_name}: {exc.text}",
                            traceback=storable(exc.traceback[-TRACEBACK_CHARS:]))
    if isinstance(exc, sandbox.AgentDied):
        return episode.fail("crashed", str(exc))
    if isinstance(exc, sandbox.AgentGarbage):
        return episode.fail("empty", str(exc))
    if isinstance(exc, sandbox.SandboxFailed):
        return episode.fail("error", f"harness fault: {exc}")
    # a remote agent's own traceback stays on its machine (AgentFailed is the harness's word for it)
    trace = None if isinstance(exc, AgentFailed) else _traceback(exc)
    return episode.fail("crashed", f"agent raised {type(exc).__name__}: {exc}", traceback=trace)


def _create(episode: Episode, make_agent: Callable[[], Agent]) -> Agent | Done:
    try:
        return make_agent()
    except Exception as exc:  # noqa: BLE001 - the agent's fault, recorded, never raised
        return episode.fail("crashed", f"agent could not be created: {type(exc).__name__}: {exc}",
                            traceback=_traceback(exc))


_thread_loops = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop = getattr(_thread_loops, "loop", None)
    if loop is None or loop.is_closed():
        loop = _thread_loops.loop = asyncio.new_event_loop()
    return loop


async def _play(episode: Episode, make_agent: Callable[[], Agent],
                wait: Callable[[Any, float], Awaitable[Any]],
                clock: Callable[[], float] = time.perf_counter,
                offload: Offload[Turn | Done] | None = None) -> RunRecord:
    """The one loop: ask, report, until the engine says Done. `wait(awaitable, seconds)` is how
    this driver waits for an async agent's answer within the run's remaining time; `clock` how it
    measures the agent's time (the HTTP driver's is the time each step says it took); `offload`,
    when given, how it runs the world's opening and steps (off the event loop; None: right here).
    The world's time is never the agent's: `clock` is read before the step is taken."""
    out: Turn | Done = episode.start() if offload is None else await offload(episode.start)
    agent = out if isinstance(out, Done) else _create(episode, make_agent)
    if isinstance(agent, Done):
        return agent.record
    try:
        return await _turns(episode, agent, out, wait, clock, offload)
    finally:
        close = getattr(agent, "close", None)
        if close is not None:
            close()


async def _turns(episode: Episode, agent: Agent, out: Turn | Done, wait: Callable[[Any, float], Awaitable[Any]],
                 clock: Callable[[], float], offload: Offload[Turn | Done] | None) -> RunRecord:
    opening = getattr(agent, "aopen", None)
    if opening is not None and isinstance(out, Turn):  # a worker for the run, before its time starts
        try:
            await wait(opening(), sandbox.START_SECONDS)
        except TimeoutError:
            return episode.fail("error", f"harness fault: the agent's process did not start within "
                                f"{sandbox.START_SECONDS:g} s").record
        except Exception as exc:  # noqa: BLE001
            return _crash(episode, exc).record
    while isinstance(out, Turn):
        began = clock()
        try:
            raw = agent(out.messages, out.tools)
            if type(raw) is not dict and inspect.isawaitable(raw):  # a plain reply (a dict) never is: no ABC check per step
                raw = await wait(raw, max(0.001, episode.time_left))
        except TimeoutError:
            out = episode.timeout()
            break
        except Exception as exc:  # noqa: BLE001
            out = _crash(episode, exc)
            break
        took = clock() - began
        out = episode.step(raw, took) if offload is None else await offload(partial(episode.step, raw, took))
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


async def _to_thread(call: Callable[[], _T]) -> _T:
    return await asyncio.to_thread(call)


async def play_async(episode: Episode, make_agent: Callable[[], Agent],
                     offload: Offload[Any] | None = None) -> RunRecord:
    """Play one run to its end as a task of the running event loop. A world that blocks
    (`blocks`) is opened and stepped by `offload` (default: `asyncio.to_thread`, the loop's default
    thread pool; the async executor passes a pool as wide as its runs in flight); any other
    world right here on the loop, as fast as a call can be."""
    return await _play(episode, make_agent, _bounded,
                       offload=(offload or _to_thread) if blocks(episode) else None)


class AgentFailed(Exception):
    """A remote agent said it failed on its own machine: the run is `crashed`, as in-process."""


class _Ask:
    """What the HTTP driver's agent answers with: an awaitable that suspends the loop until the
    next assistant message is sent in from outside (`Stepper.send`)."""

    __slots__ = ("turn",)

    def __init__(self, turn: Turn) -> None:
        self.turn = turn

    def __await__(self) -> Any:
        return (yield self)


def _asker(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> _Ask:
    return _Ask(Turn(messages, tools))


async def _as_sent(awaitable: Any, _seconds: float) -> Any:
    # no timer here: the time a step took is reported with it, and the engine checks the budget
    return await awaitable


class Stepper:
    """The HTTP driver: the one loop (`_play`) advanced one assistant message at a time.

        stepper = Stepper(episode)        # the run opened: stepper.turn is what the agent is asked
        stepper.send(message, seconds)    # the agent's answer, and how long it took
        stepper.fail(reason)              # the agent failed on its side: `crashed`
        stepper.expire()                  # the agent stayed away past its time: `timeout`
        stepper.record                    # set once the run is over

    The loop is suspended where it awaits the agent's answer; `send` resumes it, so every answer
    meets the same engine checks as in-process play (parsing, turn and time budgets, tool errors).
    Not thread-safe: one caller advances a stepper at a time. `marks[i]` is how many messages the
    agent had been shown after its first `i` answers (`marks[0]`: the opening), so the messages
    that followed answer `i` are `shown()[marks[i - 1] + 1 : marks[i]]`.
    """

    def __init__(self, episode: Episode) -> None:
        self.episode = episode
        self.turn: Turn | None = None
        self.record: RunRecord | None = None
        self.marks: list[int] = []
        self._now = 0.0
        self._coro = _play(episode, lambda: _asker, _as_sent, clock=lambda: self._now)
        self._resume(lambda: self._coro.send(None))

    @property
    def done(self) -> bool:
        return self.record is not None

    def _resume(self, move: Callable[[], Any]) -> None:
        try:
            asked = move()
        except StopIteration as finished:
            self.turn, self.record = None, finished.value
            self.marks.append(len(self.shown()))
            return
        self.turn = asked.turn
        self.marks.append(len(asked.turn.messages))

    def _check(self) -> None:
        if self.record is not None:
            raise RuntimeError("the run is over")

    def send(self, message: Any, seconds: float = 0.0) -> None:
        """The agent's answer after `seconds`: the next turn, or the end of the run."""
        self._check()
        self._now += max(0.0, seconds)
        self._resume(lambda: self._coro.send(message))

    def fail(self, reason: str, seconds: float = 0.0) -> None:
        """The agent raised on its side: the run ends `crashed` with `reason`."""
        self._check()
        self._now += max(0.0, seconds)
        self._resume(lambda: self._coro.throw(AgentFailed(reason)))

    def expire(self) -> None:
        """The agent overstayed (it never answered in time): the run ends as a `timeout`."""
        self._check()
        self._resume(lambda: self._coro.throw(TimeoutError()))

    def shown(self) -> list[dict[str, Any]]:
        """Every message the agent has been shown so far, its own answers included."""
        if self.turn is not None:
            return self.turn.messages
        assert self.record is not None
        return [{k: v for k, v in e.items() if k not in ("source", "data")}
                for e in self.record.transcript if e.get("role") is not None]

    def after(self, answer: int) -> list[dict[str, Any]]:
        """The messages that followed the agent's `answer`-th answer (1-based): tool results, a
        facilitator's words. Empty for an answer past the end of the run."""
        if not 1 <= answer < len(self.marks):
            return []
        return self.shown()[self.marks[answer - 1] + 1 : self.marks[answer]]


def replay(episode: Episode, actions: Iterable[ChatMessage]) -> Episode:
    """Feed a run's recorded actions to a fresh episode; stop at the end of the run or of the
    record. The episode is returned as it stands (its world holds the replayed final state)."""
    out = episode.start()
    for action in actions:
        if isinstance(out, Done):
            break
        out = episode.step(action)
    return episode
