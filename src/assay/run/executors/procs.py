"""The async executor across processes: one event loop per core, the runs of a batch spread over them.

One event loop plays a thousand model runs in flight, but the CPU each run costs (building
requests, parsing replies, the world's steps, the final-state hash) is spent on one core; at
`--workers 1000` against an endpoint answering in 2 s, that core is the bottleneck long before the
endpoint is. `ProcessAsyncExecutor` starts `processes` child processes (spawned: a fresh
interpreter, never a fork of this one with its threads and database connections), each playing
its share of the runs in flight on its own event loop with the async executor itself, and keeps
the one process that scores and writes the store the only one.

What travels is plain data, as with the Ray executor: the agent's portable spec and loader
options (never an API key: a child reads `OPENAI_API_KEY` from the environment it inherits), the
limits, each scenario's validated document once per child with the options its worlds are forked
with (a campaign's facilitator: its spec and endpoint, pickled), the planned runs; records come
back as plain fields. A child rebuilds each scenario and plays it only if the rebuilt content hash
is the planned one. Each child is fed a bounded window of tasks (twice its runs in flight), so memory is
bounded by `workers`, never by the batch. A child that dies takes only its runs in flight with it:
they are recorded as `error` with the reason; none is lost, none is replayed. The sink is called
in the calling thread, as every executor does.
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import pickle
import queue
from collections.abc import Iterable, Iterator
from typing import Any

from assay.run.engine import Limits, error_record
from assay.run.executors import wire
from assay.run.executors.base import Sink, Task
from assay.run.executors.aio import AsyncExecutor, lenient_gc

#: Seconds between looks at whether every child is still alive while waiting for results.
POLL_S = 0.5
WHO = "the worker process"


def _given(document: Any) -> Any:
    """A scenario document the parent sent with the run (`wire.Scenarios.task` asks for it lazily)."""
    return document


def _child(index: int, agent: tuple[str, dict[str, Any]], limits: dict[str, Any], at_once: int,
           inbox: Any, outbox: Any) -> None:
    """A child process: play the tasks `inbox` sends until it sends None; put each run's
    (child, `wire.Result`) on `outbox`."""
    import asyncio
    import os
    import signal
    import threading
    import time

    from assay.agents.loader import load_agent
    from assay.records import PlannedRun

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it stops us

    def orphaned() -> None:  # a parent killed outright (SIGKILL) cannot stop us: stop ourselves
        parent = multiprocessing.parent_process()
        while parent is None or parent.is_alive():
            time.sleep(POLL_S)
        os._exit(1)

    threading.Thread(target=orphaned, daemon=True).start()
    scenarios = wire.ScenarioCache(WHO)  # unbounded: the parent sends each document once
    options: dict[str, dict[str, Any]] = {}
    why = ""
    try:
        factory = load_agent(agent[0], **agent[1])
    except Exception as exc:  # noqa: BLE001 - every run it is given is then an error with the reason
        factory, why = None, f"{WHO} could not load the agent: {type(exc).__name__}: {exc}"

    def tasks() -> Iterator[Task]:
        while True:
            item = inbox.get()
            if item is None:
                return
            fields, document, pickled = item
            planned = PlannedRun(**fields)
            if pickled:
                options[planned.scenario_hash] = pickle.loads(pickled)
            task = scenarios.task(planned, None if document is None else functools.partial(_given, document),
                                  options.get(planned.scenario_hash))
            if factory is None:
                outbox.put((index, wire.failed(planned.run_id, why)))
            elif isinstance(task, str):
                outbox.put((index, wire.failed(planned.run_id, task)))
            else:
                yield task

    def sink(record: Any, steps: int) -> None:
        outbox.put((index, wire.encode(record, steps)))

    if factory is None:
        for _ in tasks():  # answers every task with the reason, until the parent says stop
            pass
        return
    # the iterator blocks the loop only when this child has nothing left to start: the parent keeps
    # its inbox ahead of what it plays
    with lenient_gc():
        asyncio.run(AsyncExecutor(at_once).play(tasks(), factory, Limits(**limits), sink))


class ProcessAsyncExecutor:
    """`processes` event loops in child processes, `workers` runs in flight between them."""

    name = "async"

    def __init__(self, workers: int, processes: int) -> None:
        if workers < 1 or processes < 1:
            raise ValueError("workers and processes must be at least 1")
        self.workers = workers
        self.processes = min(processes, workers)

    def execute(self, tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink) -> None:
        with lenient_gc():
            self._execute(tasks, agent_factory, limits, sink)

    def _execute(self, tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink) -> None:
        ctx = multiprocessing.get_context("spawn")
        agent = wire.agent_spec(agent_factory)
        n = self.processes
        at_once = [self.workers // n + (1 if i < self.workers % n else 0) for i in range(n)]
        outbox = ctx.Queue()
        inboxes = [ctx.Queue() for _ in range(n)]
        children = [ctx.Process(target=_child, args=(i, agent, dataclasses.asdict(limits), at_once[i],
                                                     inboxes[i], outbox), daemon=True, name=f"assay-async-{i}")
                    for i in range(n)]
        for child in children:
            child.start()
        in_flight: list[dict[str, Task]] = [{} for _ in range(n)]
        sent_documents: list[set[str]] = [set() for _ in range(n)]
        source = iter(tasks)
        exhausted = False

        def feed() -> None:
            """Top up the children's windows, each task to the child with the fewest runs per
            slot (so a batch no larger than `workers` is spread over every child, all in flight)."""
            nonlocal exhausted
            alive = [i for i, child in enumerate(children) if child.is_alive()]
            while alive and not exhausted:
                i = min(alive, key=lambda j: len(in_flight[j]) / at_once[j])
                if len(in_flight[i]) >= 2 * at_once[i]:
                    return
                task = next(source, None)
                if task is None:
                    exhausted = True
                    for box in inboxes:
                        box.put(None)
                    return
                key = task.planned.scenario_hash
                document, options = None, None
                if key not in sent_documents[i]:
                    document = task.loaded.document
                    try:
                        options = pickle.dumps(dict(task.loaded.world_options)) if task.loaded.world_options else None
                    except Exception as exc:  # noqa: BLE001 - played here as an error, never lost in a queue
                        sink(error_record(task.planned, f"the world options of scenario {task.planned.case_id} "
                                          f"cannot be sent to a worker process: {type(exc).__name__}: {exc}",
                                          task.loaded), 0)
                        continue
                sent_documents[i].add(key)
                in_flight[i][task.planned.run_id] = task
                inboxes[i].put((wire.planned_fields(task.planned), document, options))

        try:
            while True:
                feed()
                if not any(in_flight):
                    if exhausted or not any(c.is_alive() for c in children):
                        break
                    continue
                try:
                    i, result = outbox.get(timeout=POLL_S)
                except queue.Empty:
                    self._bury_dead(children, in_flight, sink)
                    continue
                wire.settle(result, in_flight[i], sink, WHO)
            for task in source:  # every worker process died before the batch was done
                sink(error_record(task.planned, "no worker process was left to play this run", task.loaded), 0)
        finally:
            for child in children:
                if child.is_alive():
                    child.terminate()
            for child in children:
                child.join(timeout=5)
            # tasks still queued for a child that is gone must not hold this process at exit
            # (a queue's feeder thread otherwise waits for a reader that will never come)
            for box in (outbox, *inboxes):
                box.cancel_join_thread()
                box.close()

    @staticmethod
    def _bury_dead(children: list[Any], in_flight: list[dict[str, Task]], sink: Sink) -> None:
        """Record the runs of a child that died as errors (every planned run yields one record)."""
        for i, child in enumerate(children):
            if child.is_alive() or not in_flight[i]:
                continue
            reason = f"{WHO} playing this run died (exit code {child.exitcode})"
            for task in in_flight[i].values():
                sink(error_record(task.planned, reason, task.loaded), 0)
            in_flight[i].clear()
