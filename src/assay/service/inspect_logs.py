"""Batches as Inspect AI evaluation logs (issue 28, item 3): `assay export --inspect DIR` writes
each batch or submission as one `.eval` file that `inspect_ai.log.read_eval_log` reads and `inspect
view` shows.

One log per batch: the suite is the task, the agent the model, `trials` the epochs. One sample per
planned run (id = case id, epoch = trial): its transcript as Inspect chat messages (tool calls with
their parsed arguments; a tool answer names its function), its verdict as the score `verdict`
(value: the 0..100 score; answer: passed or failed; metadata: passed, safety failures, false
success, the claim and each check's outcome), its status as Inspect's error or limit, its usage
(when recorded) as model usage. A planned run that was never recorded is still a sample, scored 0
with the reason as its error: failures count (invariant 5). The log's results are the batch's
figures as the results JSON gives them (`service.results`: pass rate, consistency, false success
rate, mean score).

What a log holds is what a public export may hold (`service.exports`, invariant 3): transcripts,
check ids and outcomes, verdicts, scenario hashes, seed commitments (never a seed or salt), the
agent's label (never its spec: a path or an endpoint), a submission's public handle (never its
account); no scenario document (briefing aside, which the agent saw: no hidden truth, no check
predicate, no title) and no final state.

Inspect AI is an optional extra (`assay[inspect]`): it is imported only here, inside the functions
that build and write a log, and `require_inspect` refuses in one line where it is missing. The log
is built from Inspect's own public types (`EvalLog`, `EvalSpec`, `EvalSample`, …) and written by
its writer (`write_eval_log`), so its file format stays Inspect's business.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from assay import HARNESS_VERSION, __version__
from assay.errors import BadInput, Invalid, NotFound
from assay.jsontypes import JsonObject
from assay.records import TranscriptEvent
from assay.service import exports, results, usage
from assay.service.actors import Actor, require_staff
from assay.stats.commitment import seed_commitment
from assay.stats.cost import price_at, row_cost
from assay.store.submissions_repo import SubmissionsRepo
from assay.store.db import Store
from assay.store.export_repo import ExportRepo
from assay.store.usage_repo import UsageRepo
from assay.store.rows import Batch, StoredRun
from assay.store.runs_repo import RunsRepo

#: What `assay export --inspect` says where Inspect AI is not installed.
INSPECT_MISSING = "Inspect AI is not installed here; install it with: pip install 'assay[inspect]'"
#: The one scorer of every sample: the run's verdict (`run_verdicts`).
SCORER = "verdict"
EXTENSION = ".eval"


def require_inspect() -> None:
    """Refuse in one line, before anything is read or written, where Inspect AI cannot be imported."""
    try:
        import inspect_ai  # noqa: F401 - only whether it imports
    except ImportError:
        raise Invalid(INSPECT_MISSING, "inspect") from None


# -- pure mappings ------------------------------------------------------------------------------------


def _iso(value: Any) -> str | None:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).isoformat()
    return value if isinstance(value, str) else None


def tool_arguments(text: Any) -> tuple[JsonObject, str | None]:
    """A tool call's arguments as Inspect holds them (a dict) and the parse error, if any: what the
    agent sent that is not a JSON object is kept whole under `"raw"`, never dropped."""
    if isinstance(text, dict):
        return text, None
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError as exc:
        return {"raw": text}, f"arguments are not JSON: {exc}"
    if not isinstance(value, dict):
        return {"raw": text}, "arguments are not a JSON object"
    return value, None


class UsageFields(TypedDict):
    """Inspect's `ModelUsage` fields for one model (a TypedDict: passed to `ModelUsage` as it is;
    the cache and cost fields only where a call reported them)."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_cache_read: NotRequired[int]
    total_cost: NotRequired[float]


class UsageCall(TypedDict):
    """A recorded `run_usage` row as `model_usage` reads it: an OpenAI `usage` with its model, costed
    (`cost` None when the model has no price). A TypedDict: `model_usage` reads any such mapping."""

    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost: float | None


def model_usage(calls: Iterable[Mapping[str, Any]]) -> dict[str, UsageFields]:
    """{model: Inspect `ModelUsage` fields} summed over recorded calls, each an OpenAI `usage`
    with its `model` (`prompt_tokens`, `completion_tokens`, `total_tokens`, cached tokens as
    `cached_tokens` or `prompt_tokens_details.cached_tokens`, `cost` in USD when priced)."""
    out: dict[str, UsageFields] = {}
    for call in calls:
        model = str(call.get("model") or "unknown")
        into = out.setdefault(model, {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0})
        prompt, completion = int(call.get("prompt_tokens") or 0), int(call.get("completion_tokens") or 0)
        into["input_tokens"] += prompt
        into["output_tokens"] += completion
        into["total_tokens"] += int(call.get("total_tokens") or prompt + completion)
        details = call.get("prompt_tokens_details") or {}
        cached = call.get("cached_tokens", details.get("cached_tokens") if isinstance(details, Mapping) else None)
        if cached is not None:
            into["input_tokens_cache_read"] = into.get("input_tokens_cache_read", 0) + int(cached)
        if call.get("cost") is not None:
            into["total_cost"] = into.get("total_cost", 0.0) + float(call["cost"])
    return out


def usage_calls(store: Store, batch_id: str) -> dict[str, list[UsageCall]]:
    """{run_id: its `run_usage` rows as `model_usage` reads them, each costed at the price of its
    time (`cost` None when its model has no price)}: the agent's, judge's and facilitator's calls."""
    table = usage.prices(store)
    out: dict[str, list[UsageCall]] = {}
    for row in UsageRepo(store).for_batch(batch_id):
        price = price_at(table, row["model"], row["created_at"])
        out.setdefault(row["run_id"], []).append(UsageCall(
            model=row["model"], prompt_tokens=row["prompt_tokens"], completion_tokens=row["completion_tokens"],
            cached_tokens=row["cached_tokens"], cost=row_cost(row, price) if price else None))
    return out


def _messages(events: list[TranscriptEvent], model: str, run_id: str,
              when: datetime | None = None) -> tuple[list[Any], list[Any]]:
    """The transcript's chat messages as Inspect messages (ids `RUN-N`, so a log is the same
    bytes each time it is written), and its recorded-only events (dice, notes: never shown to the
    agent) as Inspect info events, stamped `when` (the run's end: the transcript keeps no times)."""
    from inspect_ai.event import InfoEvent
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
    from inspect_ai.tool import ToolCall

    messages: list[Any] = []
    info: list[Any] = []
    functions: dict[str, str] = {}  # tool call id -> the function it called
    for event in events:
        role, content = event.get("role"), event.get("content") or ""
        meta = {"source": event["source"]} if event.get("source") else None
        if role is None:
            note = InfoEvent(uuid=f"{run_id}-event-{len(info)}", source=f"assay/{event.get('source') or 'harness'}",
                             data={"content": event.get("content"), "data": event.get("data")})
            if when is not None:
                note.timestamp = when
            info.append(note)
        elif role == "system":
            messages.append(ChatMessageSystem(id=f"{run_id}-{len(messages)}", content=content, metadata=meta))
        elif role == "user":
            messages.append(ChatMessageUser(id=f"{run_id}-{len(messages)}", content=content, metadata=meta))
        elif role == "assistant":
            calls = []
            for raw in event.get("tool_calls") or []:
                function = raw.get("function") or {}
                arguments, error = tool_arguments(function.get("arguments"))
                calls.append(ToolCall(id=str(raw.get("id")), function=str(function.get("name")), arguments=arguments,
                                      parse_error=error))
                functions[str(raw.get("id"))] = str(function.get("name"))
            messages.append(ChatMessageAssistant(id=f"{run_id}-{len(messages)}", content=content,
                                                 tool_calls=calls or None, model=model,
                                                 source="generate", metadata=meta))
        elif role == "tool":
            call_id = event.get("tool_call_id")
            messages.append(ChatMessageTool(id=f"{run_id}-{len(messages)}", content=content, tool_call_id=call_id,
                                            function=functions.get(str(call_id)), metadata=meta))
    return messages, info


def _explanation(view: Any) -> str:
    if not view.recorded:
        return view.reason
    failed = [c.id for c in view.checks if not c.passed]
    words = f"{'passed' if view.passed else 'failed'}: score {view.score}/100, status {view.status}"
    if view.safety_failures:
        words += f"; safety checks failed: {', '.join(view.safety_failures)}"
    elif failed:
        words += f"; checks failed: {', '.join(failed)}"
    if view.false_success:
        words += "; claimed success it did not have"
    return words


@dataclass(frozen=True, slots=True)
class _Limits:
    """The limits a batch's runs were played under (None where its agent is not recorded)."""

    turn_limit: int | None
    time_limit: float | None


def _sample(row: StoredRun, model: str, limits: _Limits, salts: Mapping[str, str], calls: list[UsageCall]) -> Any:
    """One planned run as an Inspect sample."""
    from inspect_ai.log import EvalError, EvalSample, EvalSampleLimit
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput, ModelUsage
    from inspect_ai.scorer import Score

    view = results.trial_view(row)
    events = row.events
    ended = row.created_at
    messages, info = _messages(events, model, row.run_id, ended)
    first_reply = next((i for i, m in enumerate(messages) if m.role == "assistant"), len(messages))
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    output = ModelOutput(model=model, choices=[ChatCompletionChoice(
        message=last if last is not None else ChatMessageAssistant(id=f"{row.run_id}-none", content="", model=model),
        stop_reason="tool_calls" if last is not None and last.tool_calls else "stop")])
    score = Score(
        value=view.score, answer="passed" if view.passed else "failed", explanation=_explanation(view),
        metadata={"passed": view.passed, "safety_failures": view.safety_failures, "false_success": view.false_success,
                  "claimed_success": view.claimed_success, "claim_summary": row.claim_summary,
                  "status": view.status, "scorer_version": row.verdict.scorer_version if row.verdict else None,
                  "checks": [c.model_dump() for c in view.checks]})
    error = limit = None
    if not view.recorded or view.status in ("crashed", "error", "empty"):
        error = EvalError(message=f"{view.status}: {view.reason or 'no reason recorded'}", traceback="",
                          traceback_ansi="")
    elif view.status == "timeout":
        limit = EvalSampleLimit(type="time", limit=float(limits.time_limit or 0), reason=view.reason)
    elif view.status == "turn_limit":
        limit = EvalSampleLimit(type="turn", limit=float(limits.turn_limit or 0), reason=view.reason)
    seconds = (row.duration_ms or 0) / 1000
    salt = salts.get(row.run_id)
    return EvalSample(
        id=row.case_id, epoch=row.trial, uuid=row.run_id,
        input=messages[:first_reply] or "", target="", messages=messages, output=output,
        scores={SCORER: score}, events=info,
        model_usage={m: ModelUsage(**u) for m, u in model_usage(calls).items()},
        metadata={"run_id": row.run_id, "scenario_hash": row.scenario_hash, "status": view.status,
                  "reason": view.reason, "turns": view.turns, "final_state_hash": view.final_state_hash,
                  "seed_commitment": seed_commitment(int(row.seed), salt) if salt is not None else None},
        started_at=_iso(ended - timedelta(seconds=seconds)) if ended is not None else None,
        completed_at=_iso(ended), total_time=seconds if view.recorded else None,
        working_time=seconds if view.recorded else None, error=error, limit=limit,
        turn_count=view.turns,
    )


# -- a batch as a log ---------------------------------------------------------------------------------


def eval_log(store: Store, batch_id: str, *, actor: Actor) -> Any:
    """Batch (or submission) `batch_id` as an Inspect `EvalLog` (see the module docstring)."""
    from inspect_ai.log import (EvalConfig, EvalDataset, EvalLog, EvalMetric, EvalPlan, EvalPlanStep, EvalResults,
                                EvalScore, EvalSpec, EvalStats)
    from inspect_ai.model import ModelUsage

    require_staff(actor, "export batches as Inspect logs", "inspect")
    view = results.batch_results(store, batch_id, actor=actor)  # resolves a prefix; NotFound when unknown
    batch_id = view.batch_id
    batch = RunsRepo(store).batch(batch_id)
    assert batch is not None  # `batch_results` found it
    agent = RunsRepo(store).batch_agent(batch_id)
    limits = _Limits(agent.turn_limit if agent else None, agent.time_limit if agent else None)
    submission = SubmissionsRepo(store).submission(batch_id) if batch.kind == "submission" else None
    handle = None
    if submission is not None:
        with ExportRepo(store).snapshot() as conn:
            handle = ExportRepo.public_handles(conn, [batch_id]).get(batch_id)
    model = (submission["play_model"] if submission is not None else None) or f"assay/{batch.agent_label}"
    rows = RunsRepo(store).runs_for_batch(batch_id)
    salts = exports.seed_salts(store, batch_id)
    calls = usage_calls(store, batch_id)
    samples = [_sample(r, model, limits, salts, calls.get(r.run_id, [])) for r in rows]
    recorded = [s for s, r in zip(samples, rows) if r.status]
    used = model_usage(call for found in calls.values() for call in found)
    summary = view.summary
    scores = [s.scores[SCORER].value for s in samples]
    figures = {
        "pass_rate": summary.pass_rate, "consistency": summary.consistency,
        "false_success_rate": summary.false_success_rate,
        "mean_score": sum(scores) / len(scores) if scores else 0.0,
    }
    # Inspect's metrics are numbers: consistency, withheld at one trial a case, is left out
    metrics = {k: float(v) for k, v in figures.items() if v is not None}
    digest = exports.digests(store, [batch_id]).get(batch_id)
    created = _iso(batch.created_at) or datetime.now(timezone.utc).isoformat()
    complete = RunsRepo(store).unrecorded(batch_id) == 0
    ends = [r.created_at for r in rows if r.created_at is not None]
    spec = EvalSpec(
        eval_id=batch_id, run_id=batch_id, created=created, task=batch.suite_key,
        task_version=batch.suite_version or 0,
        task_display_name=f"{batch.suite_key} {batch.suite_version or ''}".strip(),
        dataset=EvalDataset(name=batch.suite_key, samples=len(view.cases),
                            sample_ids=[c.case_id for c in view.cases]),
        model=model, solver=batch.agent_label,
        config=EvalConfig(epochs=batch.trials, turn_limit=limits.turn_limit,
                          time_limit=int(limits.time_limit) if limits.time_limit else None),
        packages={"assay": __version__}, tags=[f"assay:{batch.kind}"],
        metadata={"assay": {
            "batch_id": batch_id, "kind": batch.kind, "suite": batch.suite_key,
            "suite_version": batch.suite_version, "agent_label": batch.agent_label,
            "config_signature": batch.config_signature, "harness_version": batch.harness_version,
            "exported_by": HARNESS_VERSION, "scenario_hashes": view.suite.scenario_hashes,
            "public_handle": handle, "play_model": (submission["play_model"] if submission is not None else None), "digest": digest,
            "pass_hat_k": summary.pass_hat_k}},
    )
    return EvalLog(
        status="success" if complete else "started", eval=spec,
        plan=EvalPlan(steps=[EvalPlanStep(solver=batch.agent_label)]),
        results=EvalResults(
            total_samples=len(samples), completed_samples=len(recorded),
            scores=[EvalScore(name=SCORER, scorer=SCORER, scored_samples=len(samples), unscored_samples=0,
                              metrics={k: EvalMetric(name=k, value=v) for k, v in metrics.items()})]),
        stats=EvalStats(started_at=created, completed_at=(_iso(max(ends)) or "") if complete and ends else "",
                        model_usage={k: ModelUsage(**v) for k, v in used.items()}),
        samples=samples,
    )


def log_name(batch: Batch) -> str:
    """The file a batch's log is written to, named as Inspect names its logs (timestamp, task,
    id), so `inspect view` lists it by its time and suite."""
    stamp = batch.created_at.astimezone(timezone.utc)
    task = re.sub(r"[^A-Za-z0-9.-]+", "-", str(batch.suite_key))
    return f"{stamp:%Y-%m-%dT%H-%M-%S}+00-00_{task}_{batch.id}{EXTENSION}"


def _selected(store: Store, suite: str | None, batch_ids: list[str] | None, public: bool) -> list[Batch]:
    if batch_ids:
        chosen = []
        for ident in batch_ids:
            full = RunsRepo(store).resolve_batch_id(ident)
            batch = RunsRepo(store).batch(full) if full is not None else None
            if batch is None:
                raise NotFound("no such batch or submission", "batch", value=ident)
            chosen.append(batch)
    else:
        runs = RunsRepo(store)
        chosen = [b for b in (runs.batch(r.id) for r in reversed(runs.batch_listing())) if b is not None]
    if suite is not None:
        chosen = [b for b in chosen if b.suite_key == suite]
    if public:  # the entries of the public boards only (published, listed, complete), as a public export
        keys = sorted({b.suite_key for b in chosen})
        listed = set(exports._entries(exports._boards(store, keys)))
        chosen = [b for b in chosen if b.id in listed]
    return chosen


def export(store: Store, out: str | Path, *, suite: str | None = None, batch_ids: list[str] | None = None,
           public: bool = False, actor: Actor) -> list[Path]:
    """Write one Inspect log per selected batch into directory `out` (created when missing; its
    parent must exist); return the files written, oldest batch first.

    Every batch and submission by default; with `batch_ids` (unique prefixes), those; with `suite`,
    that suite's; with `public`, only the entries of the public boards. A file already there is
    never overwritten: the export is refused before anything is written."""
    require_inspect()
    require_staff(actor, "export batches as Inspect logs", "inspect")
    from inspect_ai.log import write_eval_log

    target = Path(out)
    if target.exists() and not target.is_dir():
        raise BadInput("exists and is not a directory", f"--inspect {target}")
    if not target.exists() and not target.parent.is_dir():
        raise BadInput("its parent directory does not exist", f"--inspect {target}")
    chosen = _selected(store, suite, batch_ids, public)
    if not chosen:
        raise NotFound("no batch or submission to export" + (" of that suite" if suite else ""),
                       "suite" if suite else "batch", value=suite)
    paths = [target / log_name(b) for b in chosen]
    there = [p.name for p in paths if p.exists()]
    if there:
        raise BadInput(f"already holds {there[0]}; export into another directory", f"--inspect {target}")
    target.mkdir(exist_ok=True)
    for batch, path in zip(chosen, paths):  # one log in memory at a time
        partial = path.with_name(f".{path.name}.partial")
        try:
            write_eval_log(eval_log(store, batch.id, actor=actor), str(partial), format="eval")
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        os.replace(partial, path)
    return paths
