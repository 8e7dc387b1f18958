"""What crosses a process boundary, both ways, for the executors that play runs elsewhere (`procs`:
child event loops; `ray`: Ray workers), and how what comes back is settled: one shape, one path.

Out (plain data, never an object of this process):
- the agent as `agent_spec(factory)`: its portable spec and loader options (never an API key: the
  other process reads OPENAI_API_KEY from its own environment);
- each planned run as `dataclasses.asdict(planned)`, and each scenario's validated document once,
  rebuilt there by a `ScenarioCache`, which plays it only if it rebuilds to the planned content
  hash (other kit code builds another world, which the hash fingerprints).

Back, one `Result` per run: `encode(record, steps)` — the record's own fields without the final
state, and the final state once, as the canonical text its hash was computed from (so it is
serialised once, where the run ended, and written to the store as is) — or `failed(run_id,
reason)` for a run that could not be played there. `settle` turns each into the sink's call,
at most once per planned run.
"""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from assay.records import PlannedRun, RunRecord
from assay.run.engine import error_record
from assay.run.executors.base import Sink, Task
from assay.scenario.load import LoadedScenario, parse_scenario
from assay.worlds.kits import get_kit

#: (run id, record fields without `final_state` | None, final state text | the reason it was not
#: played, agent steps)
Result = tuple[str, dict[str, Any] | None, str | None, int]


def agent_spec(factory: Any) -> tuple[str, dict[str, Any]]:
    """The agent as another process loads it: `load_agent(*agent_spec(factory))`."""
    spec = getattr(factory, "portable_spec", None) or factory.spec
    return spec, dict(getattr(factory, "options", None) or {})


def planned_fields(planned: PlannedRun) -> dict[str, Any]:
    return dataclasses.asdict(planned)


def encode(record: RunRecord, steps: int) -> Result:
    """A finished run as it travels back (it is done: nothing changes its fields)."""
    fields = dict(record.__dict__)
    text = record.final_state_text
    if text is not None:
        del fields["final_state"]
    return record.run_id, fields, text, steps


def failed(run_id: str, reason: str) -> Result:
    return run_id, None, reason, 0


def decode(fields: dict[str, Any], text: str | None) -> RunRecord:
    if text is not None:
        fields["final_state"] = json.loads(text)
    record = RunRecord.model_construct(**fields)
    return record.with_final_state_text(text) if text is not None else record


def settle(result: Result, in_flight: dict[str, Task], sink: Sink, who: str) -> None:
    """Hand one result to the sink, and take its run off `in_flight`; a result for a run not
    in flight (already settled, or never sent) is dropped: no run is stored twice."""
    run_id, fields, text, steps = result
    task = in_flight.pop(run_id, None)
    if task is None:
        return
    if fields is None:
        sink(error_record(task.planned, text or f"{who} could not play this run", task.loaded), 0)
    else:
        sink(decode(fields, text), steps)


def rebuild_scenario(document: Any, planned_hash: str, case_id: str, who: str) -> LoadedScenario | str:
    """A planned scenario rebuilt from its document in another process (`who`: "the Ray worker",
    "the worker process"), or why it cannot be played there: it would not parse, or this process's
    kit code builds another world from it (another content hash)."""
    try:
        loaded = parse_scenario(document, f"scenario {case_id}", get_kit)
    except Exception as exc:  # noqa: BLE001 - a BadInput, or a kit fault
        return f"{who} could not rebuild scenario {case_id}: {type(exc).__name__}: {exc}"
    if loaded.content_hash != planned_hash:
        return (f"{who} rebuilt scenario {case_id} with content hash {loaded.content_hash[:12]}, "
                f"not the planned {planned_hash[:12]} (does it run other Assay code?)")
    return loaded


class ScenarioCache(OrderedDict[str, "LoadedScenario | str"]):
    """Scenarios rebuilt in this process, by planned content hash (what would not rebuild is kept
    as the reason), the `most` used last; a batch's world options are applied per task, never
    cached with the scenario."""

    def __init__(self, who: str, most: int | None = None) -> None:
        super().__init__()
        self.who = who
        self.most = most

    def task(self, planned: PlannedRun, document: Callable[[], Any] | None,
             options: dict[str, Any] | None = None) -> Task | str:
        """The task playing `planned`, or why it cannot be played here. `document` fetches the
        scenario's document when it is not cached (None: it was not sent)."""
        key = planned.scenario_hash
        loaded = self.get(key)
        if loaded is not None:
            self.move_to_end(key)
        elif document is None:
            return f"{self.who} was not sent scenario {planned.case_id}"
        else:
            try:
                loaded = rebuild_scenario(document(), key, planned.case_id, self.who)
            except Exception as exc:  # noqa: BLE001 - fetching the document failed (the object store)
                return f"{self.who} could not rebuild scenario {planned.case_id}: {type(exc).__name__}: {exc}"
            self[key] = loaded
            while self.most is not None and len(self) > self.most:
                self.popitem(last=False)
        if isinstance(loaded, str):
            return loaded
        if options:
            loaded = dataclasses.replace(loaded, world_options=options)
        return Task(loaded, planned)
