"""Scripted runs on every core: a batch of a built-in scripted agent (`reference:NAME`) played by
worker processes forked from this one, while this process claims slots and writes the store.

A scripted run costs nothing but CPU (its agent answers at once), so one process plays at most one
core's worth of runs, and the same process also claims, scores and writes them. `ForkedScripted`
forks `processes` children (fork, not spawn: a child starts in milliseconds with this process's
imports and the agent already in memory, and touches nothing else of it — no store, no thread). The
parent hands out planned runs in blocks, each scenario (pickled) the first time a child needs it;
a child plays each run, scores it with the scenario's checks and encodes its transcript and actions
as the store would (`jsontext.dumps`; the final state is already its canonical text), and sends
back a block of finished runs as text and outcomes, which cost the parent next to nothing to
receive (`RunRecord.encoded`). The sink is called in the calling thread, once per task, as every
executor does.

Durability is the writer's, as with every executor: a run is stored once the sink has it and the
writer wrote it; a kill costs the runs in flight and the writer's buffer, whose slots stay pending
for `assay resume`. Ctrl-C and SIGTERM are the parent's: children ignore SIGINT, die by SIGTERM, and
leave by themselves when their parent is gone. A child that dies takes only its runs in flight with
it: they are recorded as `error` with the reason (every planned run yields one record); what is left
is played in this process.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys
from collections.abc import Iterable, Iterator
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from typing import Any

from assay.jsontext import dumps
from assay.records import PlannedRun, RunRecord
from assay.run.drivers import play_sync
from assay.run.engine import Episode, Limits, error_record, open_episode
from assay.run.executors.base import Sink, Task
from assay.scenario.load import LoadedScenario
from assay.score.oracle import evaluate_checks

#: Runs per message, both ways: a block is ~20 ms of play, so messages cost little per run, and a
#: kill loses at most a few blocks of played runs (their slots stay pending).
BLOCK = 16
#: Blocks handed to a child ahead of the one it plays (it never waits for the parent).
AHEAD = 2
#: Seconds a child waits for work before it looks whether its parent is still there.
POLL_S = 0.5
WHO = "the worker process"

#: A finished run as it travels back: (run id, its record, agent steps); the record `encoded`
#: (bodies as text, scored) unless its bodies would not encode (the writer then refuses or keeps it
#: as it always did).
Played = tuple[str, RunRecord, int]


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def available() -> bool:
    """Whether children are forked here: on Linux (macOS has fork, but its system libraries are
    not safe to use in a child forked from a process with threads; there a batch stays in one)."""
    return sys.platform.startswith("linux")


def _play(loaded: LoadedScenario, planned: PlannedRun, factory: Any, limits: Limits) -> Played:
    """One run played, scored and encoded where it ends (in a child)."""
    episode: Episode | None = None
    try:
        episode = open_episode(loaded, planned, limits)
        record = play_sync(episode, factory)
    except Exception as exc:  # noqa: BLE001 - never lose a planned run
        record = error_record(planned, f"harness fault: {type(exc).__name__}: {exc}", loaded)
    steps = episode.steps if episode is not None else 0
    try:
        transcript, actions = dumps(record.transcript), dumps(record.actions)
        outcomes = tuple(evaluate_checks(loaded.scenario.checks, record.final_state))
        return planned.run_id, record.encoded(transcript, actions, outcomes), steps
    except ValueError:  # not storable as it stands: the parent's writer decides, as for any record
        return planned.run_id, record, steps


def _child(conn: Connection, parents: list[Connection], factory: Any, limits: Limits) -> None:
    """A forked child: play the blocks `conn` brings until it brings None (or the parent is gone).
    `parents`: the parent's ends of the pipes, which the fork copied: closed, so that once the
    parent is gone a send fails and a read ends rather than wait for ever."""
    for end in parents:
        end.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: it is the parent's
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent's SIGTERM handler is not ours
    gc.freeze()  # what the fork brought is never ours to collect (nor worth touching its pages)
    parent = os.getppid()
    scenarios: dict[str, LoadedScenario] = {}
    while True:
        if not conn.poll(POLL_S):
            if os.getppid() != parent:
                os._exit(1)  # the parent was killed outright: nobody will read what we play
            continue
        try:
            block = conn.recv()
            if block is None:
                return
            out = []
            for fields, pickled in block:
                planned = PlannedRun(*fields)
                if pickled is not None:
                    scenarios[planned.scenario_hash] = pickle.loads(pickled)
                out.append(_play(scenarios[planned.scenario_hash], planned, factory, limits))
            conn.send(out)
        except (EOFError, OSError):  # the parent closed its end: it stopped, and reads nothing more
            os._exit(0)


def _settle(played: Played, in_flight: dict[str, Task], sink: Sink) -> None:
    run_id, record, steps = played
    if in_flight.pop(run_id, None) is not None:  # a child answers only for runs it was sent, once
        sink(record, steps)


class ForkedScripted:
    """A scripted agent's runs played by `processes` forked children; see the module's docstring."""

    name = "threads"

    def __init__(self, processes: int) -> None:
        if processes < 1:
            raise ValueError("processes must be at least 1")
        self.processes = processes

    def execute(self, tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink,
                inline: Any = None) -> None:
        """Play every task. `inline(tasks, factory, limits, sink)` plays what no child can: a task
        whose world is forked with options (they may not pickle), and what is left when every
        child has died."""
        ctx = get_context("fork")
        children: list[tuple[Any, Connection]] = []
        done = False
        try:
            for i in range(self.processes):
                ours, theirs = ctx.Pipe()
                others = [ours, *(conn for _, conn in children)]
                process = ctx.Process(target=_child, args=(theirs, others, agent_factory, limits), daemon=True,
                                      name=f"assay-play-{i}")
                process.start()
                theirs.close()
                children.append((process, ours))
            self._drive(children, iter(tasks), agent_factory, limits, sink, inline)
            done = True
        finally:
            for process, conn in children:
                if done:  # every run came back: each child is waiting for its next block
                    try:
                        conn.send(None)
                    except OSError:
                        pass
                    process.join(timeout=5)
                if process.is_alive():  # stopped (Ctrl-C, SIGTERM, a store fault): its runs stay pending
                    process.terminate()
                    process.join(timeout=5)
                conn.close()

    def _drive(self, children: list[tuple[Any, Connection]], source: Iterator[Task], agent_factory: Any,
               limits: Limits, sink: Sink, inline: Any) -> None:
        in_flight: list[dict[str, Task]] = [{} for _ in children]
        blocks = [0] * len(children)
        sent: list[set[str]] = [set() for _ in children]
        alive = set(range(len(children)))
        exhausted = False

        def feed(i: int) -> None:
            nonlocal exhausted
            while not exhausted and blocks[i] < AHEAD:
                block: list[tuple[tuple[Any, ...], bytes | None]] = []
                while len(block) < BLOCK:
                    task = next(source, None)
                    if task is None:
                        exhausted = True
                        break
                    if task.loaded.world_options:  # a world forked with options: played here
                        inline(iter((task,)), agent_factory, limits, sink)
                        continue
                    key = task.planned.scenario_hash
                    pickled = None
                    if key not in sent[i]:
                        pickled = pickle.dumps(task.loaded, protocol=pickle.HIGHEST_PROTOCOL)
                        sent[i].add(key)
                    p = task.planned
                    block.append(((p.run_id, p.slot, p.case_id, p.scenario_hash, p.trial, p.seed), pickled))
                    in_flight[i][p.run_id] = task
                if not block:
                    return
                children[i][1].send(block)
                blocks[i] += 1

        for i in range(len(children)):
            feed(i)
        while alive and any(in_flight[i] for i in alive):
            conns = {children[i][1]: i for i in alive}
            sentinels = {children[i][0].sentinel: i for i in alive}
            for ready in wait([*conns, *sentinels]):
                i = conns[ready] if isinstance(ready, Connection) else sentinels[ready]
                if i not in alive:
                    continue
                conn, dead = children[i][1], not isinstance(ready, Connection)
                try:
                    while conn.poll():  # what a child sent before it died is still its work
                        results = conn.recv()
                        blocks[i] -= 1
                        for played in results:
                            _settle(played, in_flight[i], sink)
                except (EOFError, OSError):
                    dead = True
                if dead:
                    alive.discard(i)
                    self._bury(children[i][0], in_flight[i], sink)
                else:
                    feed(i)
        if not exhausted:  # every child died before the batch was done: the rest is played here
            inline(source, agent_factory, limits, sink)

    @staticmethod
    def _bury(process: Any, in_flight: dict[str, Task], sink: Sink) -> None:
        """Record the runs of a child that died as errors (every planned run yields one record)."""
        process.join(timeout=5)
        reason = f"{WHO} playing this run died (exit code {process.exitcode})"
        for task in in_flight.values():
            sink(error_record(task.planned, reason, task.loaded), 0)
        in_flight.clear()
