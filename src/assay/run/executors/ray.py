"""The ray executor: groups of runs as Ray tasks, on a local Ray started on demand or a cluster.

What travels is plain data: the agent's spec (a python file's path made absolute) and options
(never the API key — a worker reads OPENAI_API_KEY from its own environment, which a local Ray
inherits from this process), the limits, each scenario's validated document (put in the object
store once per batch) and the planned runs. A worker rebuilds the scenario, refusing one whose
content hash is not the planned one, loads the agent and plays its group on the same engine and
drivers as every other executor (the async executor for async agents, `play_sync` otherwise), and
sends the records back; the sink is called here, in the one process that writes the store.

`workers` is the number of runs in flight overall. Groups are `workers ÷ CPUs` runs (at least one)
so each CPU plays one group at a time, with at most two groups per CPU queued, which keeps memory
flat however large the batch. A group whose task fails (its worker died, Ray itself failed) is
recorded run for run as `error`: no planned run is ever lost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from assay.errors import BadInput
from assay.records import PlannedRun, RunRecord
from assay.run.engine import Limits, error_record
from assay.run.executors import Sink, Task


def _play_group(agent: tuple[str, dict[str, Any]], limits: dict[str, Any], documents: dict[str, Any],
                group: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str | None, int]]:
    """In a Ray worker: play `group` and return (record fields, final state text, steps) per run."""
    from assay.agents.loader import load_agent
    from assay.run.drivers import play_sync
    from assay.run.engine import open_episode
    from assay.run.executors.aio import AsyncExecutor
    from assay.scenario.load import parse_scenario

    lim = Limits(**limits)
    loaded: dict[str, Any] = {}
    tasks, out = [], []
    for fields in group:
        planned = PlannedRun(**fields)
        scenario = loaded.get(planned.scenario_hash)
        if scenario is None:
            doc = documents.get(planned.scenario_hash)
            scenario = parse_scenario(doc, f"scenario {planned.case_id}") if doc is not None else None
            if scenario is not None and scenario.content_hash != planned.scenario_hash:
                scenario = None  # this worker's kit materialises another world: never play it
            loaded[planned.scenario_hash] = scenario
        if scenario is None:
            out.append(_fields(error_record(planned, "the worker could not rebuild the planned scenario "
                                                     "(its content hash differs)"), 0))
        else:
            tasks.append(Task(scenario, planned))
    factory = load_agent(agent[0], **agent[1])
    if factory.is_async:
        AsyncExecutor(max(1, len(tasks))).execute(tasks, factory, lim, lambda r, s: out.append(_fields(r, s)))
    else:
        for task in tasks:
            episode = open_episode(task.loaded, task.planned, lim)
            out.append(_fields(play_sync(episode, factory), episode.steps))
    return out


def _fields(record: RunRecord, steps: int) -> tuple[dict[str, Any], str | None, int]:
    return record.model_dump(), record.final_state_text, steps


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
        except ImportError:  # pragma: no cover - a declared dependency
            raise BadInput("Ray is not installed (pip install ray)", "--executor") from None
        started = not ray.is_initialized()
        if started:
            try:
                local = {} if self.address else {"_node_ip_address": "127.0.0.1"}  # a local Ray stays on loopback
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         configure_logging=False, **local)
            except Exception as exc:  # noqa: BLE001 - a cluster that is not there is bad input
                raise BadInput(f"could not start or reach Ray: {type(exc).__name__}: {exc}"[:300],
                               "--ray-address" if self.address else "--executor") from None
        try:
            self._play(ray, tasks, agent_factory, limits, sink)
        finally:
            if started:
                ray.shutdown()

    def _play(self, ray: Any, tasks: Iterable[Task], agent_factory: Any, limits: Limits, sink: Sink) -> None:
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        size = max(1, -(-self.workers // cpus))
        window = 2 * cpus
        agent = (getattr(agent_factory, "portable_spec", None) or agent_factory.spec, dict(agent_factory.options))
        play = ray.remote(num_cpus=1, max_retries=0)(_play_group)
        docs: dict[str, Any] = {}
        docs_ref = None
        pending: dict[Any, list[Task]] = {}
        source = iter(tasks)

        def groups() -> Iterator[list[Task]]:
            while chunk := list(islice(source, size)):
                yield chunk

        feed = groups()

        def submit() -> bool:
            nonlocal docs_ref
            group = next(feed, None)
            if group is None:
                return False
            fresh = {t.planned.scenario_hash: t.loaded.document for t in group if t.planned.scenario_hash not in docs}
            if fresh or docs_ref is None:
                docs.update(fresh)
                docs_ref = ray.put(docs)
            ref = play.remote(agent, dataclasses.asdict(limits), docs_ref,
                              [dataclasses.asdict(t.planned) for t in group])
            pending[ref] = group
            return True

        while len(pending) < window and submit():
            pass
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            group = pending.pop(ref)
            try:
                results = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - never lose a planned run
                reason = f"ray task failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                results = [_fields(error_record(t.planned, reason, t.loaded), 0) for t in group]
            for fields, text, steps in results:
                record = RunRecord.model_construct(**fields)
                sink(record.with_final_state_text(text) if text is not None else record, steps)
            submit()
