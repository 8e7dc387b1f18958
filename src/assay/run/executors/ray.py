"""The ray executor: groups of planned runs as Ray tasks, on a local Ray or an existing cluster.

    RayExecutor(workers, address=None)   # a private local Ray, started and stopped by `execute`
    RayExecutor(workers, address="auto") # an existing cluster ("auto", "HOST:PORT", RAY_ADDRESS)

When this process is already connected to a Ray (a test session, a notebook), that Ray is used and
left running. A local Ray is started with no dashboard, no usage reporting and the workers' output
kept out of the terminal, and is shut down when `execute` ends, however it ends (an exception,
Ctrl-C); groups still in flight are cancelled first. Ray (2.60) listens on all interfaces and
names the node by its routable address even when asked for 127.0.0.1; it is guarded by Ray's
token authentication (~/.ray/auth_token), and nothing of it leaves the machine. An address nothing
answers at is refused at once as bad input (Ray itself would retry for minutes).

What travels is plain data, never objects of this process: the agent's spec (a python file's path
made absolute: on a cluster, every node needs the file there, and Assay installed) and its loader
options — never an API key: a worker reads OPENAI_API_KEY from its own environment, which a local
Ray's workers inherit from this process as it was when Ray started — the limits, the planned runs,
and each scenario's validated document, put in the object store once per batch, with the options
its worlds are forked with (a campaign's facilitator: its spec and endpoint) sent with each group
that plays it. A worker rebuilds each scenario from its document and plays it only if the rebuilt content hash is the planned one
(a cluster node with other kit code materialises another world, which the hash fingerprints); the
rebuilt scenarios are cached per worker process. The runs are played by the executors that play
them here, on the one engine: an async agent's group on the async executor, a sync agent's on the
threads executor (its watchdog ends a run whose agent overstays, as it does here). Records come
back as plain fields, and the sink is called in this thread, in the order groups finish: the one
process that writes the store stays the only one.

How `workers` is spent (the number of runs in flight overall), with C the cluster's CPUs:

- slots = min(workers, C) groups play at once, each a Ray task holding one CPU;
- each group plays a = workers // slots of its runs at once, and holds a whole number of rounds
  of a runs: one round for each slot's first group (so `workers` runs or fewer all play at once),
  two rounds next, then as many as the groups so far say fill `GROUP_SECONDS` of a
  worker's time (so a task amortises Ray's per-task cost over fast scripted runs, while slow model
  runs travel one round at a time and come back round by round), never more than `MAX_GROUP`
  runs unless a alone is more;
- at most 2 × slots groups are in flight when the workers fill the cluster (a second group per CPU
  waits, queued in Ray, to take over at once), exactly `slots` when they do not (a queued group would
  start on an idle CPU and exceed `workers`).

Memory is therefore bounded by `workers`, never by the size of the batch. No planned run is lost:
a group whose task fails (its worker died, Ray failed) is recorded run for run as `error` with the
reason, and a group's run the worker could not play (its scenario would not rebuild to the planned
hash, its agent would not load) is an `error` naming why. Tasks are not retried: a replay would
spend an agent's budget twice without saying so.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from assay.errors import BadInput
from assay.records import PlannedRun, RunRecord
from assay.run.engine import Limits, error_record
from assay.run.executors import wire
from assay.run.executors.base import RAY_MISSING, Sink, Task

#: A group is sized to keep its worker busy this long (seconds), as far as earlier groups tell ...
GROUP_SECONDS = 0.25
#: ... with at most this many runs (unless it plays more than that at once).
MAX_GROUP = 256
#: Seconds to wait for a cluster's address to accept a connection.
PROBE_SECONDS = 5.0
#: Rebuilt scenarios a worker process keeps, by content hash.
SCENARIO_CACHE = 64
WHO = "the Ray worker"


# -- in the worker ---------------------------------------------------------------------------------

_rebuilt = wire.ScenarioCache(WHO, SCENARIO_CACHE)


def play_group(agent: tuple[str, dict[str, Any]], limits: dict[str, Any], scenarios: dict[str, Any],
               runs: list[dict[str, Any]], at_once: int,
               options: dict[str, dict[str, Any]] | None = None) -> tuple[float, list[wire.Result]]:
    """Play one group of planned runs in this (Ray worker) process: the seconds its runs took to
    play, and one `wire.Result` per run.

    `scenarios` maps each planned scenario hash of the group to the object reference of its
    document; `runs` are the PlannedRun fields; `at_once` is how many runs play concurrently;
    `options` the world options of the scenarios that have some (by hash), which this batch
    gives them (so they are never cached with the scenario)."""
    from assay.agents.loader import load_agent
    from assay.run.executors.aio import AsyncExecutor
    from assay.run.executors.threads import ThreadExecutor

    def fetch(ref: Any) -> Any:
        import ray

        return ray.get(ref)

    out: list[wire.Result] = []
    tasks: list[Task] = []
    for fields in runs:
        planned = PlannedRun(**fields)
        ref = scenarios[planned.scenario_hash]
        task = _rebuilt.task(planned, functools.partial(fetch, ref), (options or {}).get(planned.scenario_hash))
        if isinstance(task, str):
            out.append(wire.failed(planned.run_id, task))
        else:
            tasks.append(task)
    if not tasks:
        return 0.0, out
    try:
        factory = load_agent(agent[0], **agent[1])
    except Exception as exc:  # noqa: BLE001 - e.g. the agent's file is not on this node
        reason = f"{WHO} could not load the agent: {type(exc).__name__}: {getattr(exc, 'message', exc)}"
        return 0.0, out + [wire.failed(t.planned.run_id, reason) for t in tasks]

    def sink(record: RunRecord, steps: int) -> None:
        out.append(wire.encode(record, steps))

    width = max(1, min(len(tasks), at_once))
    executor = AsyncExecutor(width) if factory.is_async else ThreadExecutor(width)
    began = time.perf_counter()
    executor.execute(tasks, factory, Limits(**limits), sink)  # the async one in its own asyncio.run
    return time.perf_counter() - began, out


# -- in the driver -----------------------------------------------------------------------------------


@dataclass
class Sizing:
    """The module docstring's rule: how `workers` runs in flight are spread over a cluster."""

    at_once: int  # runs one group plays at once
    window: int  # groups in flight
    most: int  # the largest group
    rounds: int = 2  # rounds of `at_once` runs in the next group
    round_seconds: float | None = None  # what a round has taken so far (a moving average)
    single: int = 0  # groups still to hold one round only: the first of each slot

    @classmethod
    def of(cls, workers: int, cpus: int) -> Sizing:
        slots = max(1, min(workers, cpus))
        at_once = max(1, workers // slots)
        window = 2 * slots if workers >= cpus else slots
        return cls(at_once, window, max(at_once, MAX_GROUP), single=slots)

    @property
    def size(self) -> int:
        return min(self.most, self.at_once * self.rounds)

    def take(self) -> int:
        """The size of the next group: one round for each slot's first (a batch of `workers`
        runs or fewer then plays all at once, over every slot), then `size`."""
        if self.single:
            self.single -= 1
            return min(self.most, self.at_once)
        return self.size

    def learn(self, seconds: float, runs: int) -> None:
        """A group of `runs` played in `seconds`: size the next ones to fill `GROUP_SECONDS`."""
        if runs <= 0 or seconds <= 0:
            return
        per_round = seconds / max(1, -(-runs // self.at_once))
        self.round_seconds = per_round if self.round_seconds is None else 0.5 * (self.round_seconds + per_round)
        self.rounds = max(1, min(self.most // self.at_once, int(GROUP_SECONDS / self.round_seconds)))


def _reachable(address: str, seconds: float = PROBE_SECONDS) -> None:
    """Refuse an address nobody listens on before Ray is asked: Ray would retry for minutes,
    logging a line every few seconds and deaf to Ctrl-C. The address is resolved as Ray resolves it
    ("auto", RAY_ADDRESS, and a loopback host made the node's own address); ray:// goes to Ray."""
    if "://" in address:
        return
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # pragma: no cover - a Ray that moved it: probe the address as given
        resolved: str | None = address
    else:
        resolved = canonicalize_bootstrap_address(address)  # ConnectionError: no cluster for "auto"
    host, sep, port = (resolved or "").rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=seconds).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {resolved} ({exc.strerror or exc})") from None


def _why(exc: BaseException) -> str:
    """A failed task's reason in one line: the agent-side cause when Ray wraps one."""
    cause = getattr(exc, "cause", None)
    shown = cause if isinstance(cause, BaseException) else exc
    lines = [ln.strip() for ln in str(shown).splitlines() if ln.strip()]
    return f"ray task failed: {type(shown).__name__}: {lines[0] if lines else 'no detail'}"


class RayExecutor:
    name = "ray"

    def __init__(self, workers: int = 4, address: str | None = None) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.workers = workers
        self.address = address

    def execute(self, tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink) -> None:
        try:
            import ray
        except ImportError:  # make_executor refuses first; a RayExecutor built by hand says the same
            raise BadInput(RAY_MISSING, "--executor") from None
        ours = not ray.is_initialized()
        if ours:
            self._connect(ray)
        try:
            self._play(ray, tasks, agent_factory, limits, sink)
        finally:
            if ours:
                ray.shutdown()  # a local Ray stops; from a cluster, this process disconnects

    def _connect(self, ray: Any) -> None:
        quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
        try:
            if self.address is not None:
                _reachable(self.address)
                ray.init(address=self.address, **quiet)
            else:
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the machine
                # "local": a Ray of our own, even when RAY_ADDRESS or a `ray start` names another
                # loopback asked for; Ray still names the node by its routable address (see above)
                ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1", **quiet)
        except Exception as exc:  # noqa: BLE001 - a cluster that is not there is bad input
            first = (str(exc).strip().splitlines() or [""])[0]
            if self.address is not None:
                raise BadInput(f"could not connect to Ray at '{self.address}': {type(exc).__name__}: {first}"[:400],
                               "--ray-address") from None
            raise BadInput(f"could not start a local Ray: {type(exc).__name__}: {first}"[:400], "--executor") from None

    def _play(self, ray: Any, tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink) -> None:
        sizing = Sizing.of(self.workers, max(1, int(ray.cluster_resources().get("CPU", 1))))
        agent = wire.agent_spec(agent_factory)
        limit_fields = dataclasses.asdict(limits)
        remote = ray.remote(num_cpus=1, max_retries=0)(play_group)
        documents: dict[str, Any] = {}  # planned scenario hash → object ref: one put per batch
        pending: dict[Any, dict[str, Task]] = {}
        source = iter(tasks)

        def submit() -> bool:
            group = list(islice(source, sizing.take()))
            if not group:
                return False
            refs, options = {}, {}
            for t in group:
                key = t.planned.scenario_hash
                if key not in documents:
                    documents[key] = ray.put(t.loaded.document)
                refs[key] = documents[key]
                if t.loaded.world_options:
                    options[key] = dict(t.loaded.world_options)
            runs = [wire.planned_fields(t.planned) for t in group]
            pending[remote.remote(agent, limit_fields, refs, runs, sizing.at_once, options or None)] = {
                t.planned.run_id: t for t in group}
            return True

        try:
            while len(pending) < sizing.window and submit():
                pass
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in done:
                    self._settle(ray, ref, pending.pop(ref), sizing, sink)
                    submit()
        finally:
            for ref in pending:  # an exception or Ctrl-C here: stop what still plays for us
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001, S110 - best effort; the Ray may be going away
                    pass

    @staticmethod
    def _settle(ray: Any, ref: Any, group: dict[str, Task], sizing: Sizing, sink: Sink) -> None:
        """Hand a finished group's records to the sink; every planned run of it exactly once."""
        try:
            seconds, results = ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - the task failed: its runs are errors, never lost
            reason = _why(exc)
            for task in group.values():
                sink(error_record(task.planned, reason, task.loaded), 0)
            return
        sizing.learn(seconds, len(results))
        for result in results:
            wire.settle(result, group, sink, WHO)
        for task in group.values():
            sink(error_record(task.planned, f"{WHO} returned no record for this run", task.loaded), 0)
