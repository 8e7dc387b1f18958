"""`assay export --inspect DIR` (issue 28, item 3): every batch and submission as an Inspect AI
evaluation log that Inspect's own reader loads, one sample per planned run with the run's verdict
as its score, and nothing a public export would not hold.

One SQLite store (module-scoped) holds an `assay run` batch of forge with two trials (a diligent
agent), a published submission of forge (a hasty one: failed checks, a safety failure, false
successes) under an account with a private name, and a batch whose runs were planned but never
played. Every log is read back with `inspect_ai.log.read_eval_log` and compared, run for run, with
the results JSON of its batch."""

from __future__ import annotations

import json
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.errors import BadInput, Forbidden
from assay.service import accounts, inspect_logs
from assay.service.actors import OPERATOR, PUBLIC
from assay.service.results import results_json
from assay.service.runs import run_suite
from assay.service.suites import resolve_suite
from assay.store import Store, open_store
from assay.store.runs_repo import RunsRepo

from tests.export._support import submit
from tests.support.cli import run_main

pytestmark = pytest.mark.slow  # its fixture plays and stores whole batches

ACCOUNT = "acct-secret-inspect-owner"
RUN_SEED = 7364518293746510


class Stop(Exception):
    """Raised once a batch is planned and stored: its runs stay unplayed."""


@dataclass
class Built:
    store: Store
    url: str
    run: str
    submission: str
    unplayed: str
    logs: Path
    written: list[Path]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    root = tmp_path_factory.mktemp("inspect")
    url = f"sqlite:///{root / 'assay.db'}"
    store = open_store(url)
    try:
        run = run_suite("forge", agent_spec="reference:diligent", trials=2, seed=RUN_SEED, workers=2,
                        store=store).batch_id
        accounts.create(store, ACCOUNT, "Inspector", actor=OPERATOR)
        sid = submit(store, "forge", "reference:hasty", ACCOUNT, "hasty")
        planned: list[str] = []

        def stop(batch_id: str, n: int) -> None:
            planned.append(batch_id)
            raise Stop

        with pytest.raises(Stop):
            run_suite("forge", agent_spec="reference:idle", trials=1, seed=RUN_SEED, store=store, on_created=stop)
        logs = root / "logs"
        written = inspect_logs.export(store, logs, actor=OPERATOR)
        yield Built(store, url, run, sid, planned[0], logs, written)
    finally:
        store.close()


def _read(path: Path) -> Any:
    from inspect_ai.log import read_eval_log

    return read_eval_log(str(path))


def _log_of(built: Built, batch_id: str) -> Any:
    (path,) = [p for p in built.written if batch_id in p.name]
    return _read(path)


def test_every_file_reads_back_with_a_sample_per_planned_run_scored_as_its_verdict(built: Built) -> None:
    assert sorted(p.name for p in built.logs.iterdir()) == sorted(p.name for p in built.written)
    assert len(built.written) == 3
    for batch_id in (built.run, built.submission, built.unplayed):
        expected = results_json(built.store, batch_id, actor=OPERATOR)
        log = _log_of(built, batch_id)
        trials = {(c["case_id"], t["trial"]): t for c in expected["cases"] for t in c["trials"]}
        assert len(log.samples) == len(trials) == log.results.total_samples
        assert log.eval.task == "forge" and log.eval.config.epochs == expected["trials_per_case"]
        assert {(s.id, s.epoch) for s in log.samples} == set(trials)
        for sample in log.samples:
            trial = trials[(sample.id, sample.epoch)]
            score = sample.scores[inspect_logs.SCORER]
            assert sample.uuid == trial["run_id"]
            assert score.value == trial["score"]
            assert score.metadata["passed"] is trial["passed"]
            assert score.answer == ("passed" if trial["passed"] else "failed")
            assert score.metadata["false_success"] is trial["false_success"]
            assert score.metadata["safety_failures"] == trial["safety_failures"]
            assert score.metadata["checks"] == trial["checks"]
            assert sample.metadata["status"] == trial["status"]
            assert (sample.error is not None) is (trial["status"] in ("error", "crashed", "empty"))
        summary = expected["summary"]
        metrics = {k: m.value for k, m in log.results.scores[0].metrics.items()}
        assert metrics["pass_rate"] == summary["pass_rate"]
        assert metrics["false_success_rate"] == summary["false_success_rate"]
        assert metrics["mean_score"] == pytest.approx(sum(t["score"] for t in trials.values()) / len(trials))


def test_the_figures_tell_the_agents_apart(built: Built) -> None:
    diligent, hasty, unplayed = (_log_of(built, b) for b in (built.run, built.submission, built.unplayed))
    assert diligent.status == hasty.status == "success" and unplayed.status == "started"
    assert diligent.results.scores[0].metrics["pass_rate"].value == 1.0
    assert hasty.results.scores[0].metrics["pass_rate"].value < 1.0
    assert any(s.scores["verdict"].metadata["safety_failures"] for s in hasty.samples)
    assert unplayed.results.completed_samples == 0
    assert all(s.scores["verdict"].value == 0 and "no run was recorded" in s.error.message for s in unplayed.samples)
    assert hasty.eval.metadata["assay"]["public_handle"] == "Inspector"
    assert hasty.eval.metadata["assay"]["digest"]  # the version-2 digest its board entry shows


def test_the_transcript_is_the_conversation_with_its_tool_calls(built: Built) -> None:
    log = _log_of(built, built.run)
    rows = {r.run_id: r for r in RunsRepo(built.store).runs_for_batch(built.run)}
    for sample in log.samples:
        chat = [e for e in rows[sample.uuid].transcript or [] if e.get("role")]
        assert [m.role for m in sample.messages] == [e["role"] for e in chat]
        assert [m.role for m in sample.input] == ["system", "user"]  # the briefing, as the agent got it
        for message, event in zip(sample.messages, chat):
            if event["role"] == "assistant":
                calls = event.get("tool_calls") or []
                assert [(c.id, c.function, c.arguments) for c in message.tool_calls or []] == [
                    (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]
            elif event["role"] == "tool":
                assert (message.tool_call_id, message.text) == (event["tool_call_id"], event["content"])
                assert message.function  # named after the call it answers
        last = [m for m in sample.messages if m.role == "assistant"][-1]
        assert last.tool_calls[0].function == "finish" and sample.output.message == last


def test_no_seed_salt_hidden_truth_or_account_name_in_any_byte(built: Built) -> None:
    from assay.service.exports import seed_salts

    secrets = [ACCOUNT, str(RUN_SEED)]
    for batch_id in (built.run, built.submission, built.unplayed):
        secrets += list(seed_salts(built.store, batch_id).values())
        secrets += [str(r.seed) for r in RunsRepo(built.store).runs_for_batch(batch_id, bodies=False) if r.seed > 999]
        secrets.append(RunsRepo(built.store).batch(batch_id).agent_spec)  # type: ignore[union-attr]
    for loaded in resolve_suite("forge").scenarios:
        truth = loaded.scenario.hidden_truth
        secrets += [ln.strip() for ln in truth.splitlines() if len(ln.strip()) >= 24]
        secrets += [json.dumps(c.description)[1:-1] for c in loaded.scenario.checks if len(c.description) >= 24]
        secrets.append(loaded.scenario.title)
    for path in built.written:
        with zipfile.ZipFile(path) as z:
            text = "\n".join(z.read(n).decode("utf-8") for n in z.namelist())
        found = [s for s in set(secrets) if s in text]
        assert not found, (path.name, found[:3])


def test_selection_and_refusals(built: Built, tmp_path: Path) -> None:
    public = inspect_logs.export(built.store, tmp_path / "public", public=True, actor=OPERATOR)
    assert [p.name for p in public] == [p.name for p in built.written if built.submission in p.name]
    one = inspect_logs.export(built.store, tmp_path / "one", batch_ids=[built.run[:10]], actor=OPERATOR)
    assert len(one) == 1 and built.run in one[0].name
    again = tmp_path / "one"
    with pytest.raises(BadInput, match="already holds"):
        inspect_logs.export(built.store, again, batch_ids=[built.run], actor=OPERATOR)
    assert len(list(again.iterdir())) == 1
    with pytest.raises(Forbidden):
        inspect_logs.export(built.store, tmp_path / "anyone", actor=PUBLIC)
    assert not (tmp_path / "anyone").exists()


def test_the_cli_writes_the_logs_and_says_in_one_line_when_inspect_is_missing(
        built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run_main(["export", "--inspect", str(tmp_path / "cli"), "--batch", built.submission, "--json",
                               "--db", built.url], cwd=tmp_path)
    assert code == 0, err
    files = json.loads(out)["files"]
    planned = RunsRepo(built.store).runs_for_batch(built.submission, bodies=False)
    assert len(files) == 1 and len(_read(tmp_path / "cli" / files[0]).samples) == len(planned) == 15
    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # as where the extra is not installed
    code, out, err = run_main(["export", "--inspect", str(tmp_path / "none"), "--db", built.url], cwd=tmp_path)
    assert (code, out) == (2, "")
    assert err.splitlines() == ["assay: error: --inspect: Inspect AI is not installed here; install it with: "
                                "pip install 'assay[inspect]'"]
    assert not (tmp_path / "none").exists()


_usage = st.fixed_dictionaries({"model": st.sampled_from(["m1", "m2"]), "prompt_tokens": st.integers(0, 10**6),
                                "completion_tokens": st.integers(0, 10**6)},
                               optional={"cached_tokens": st.integers(0, 10**6), "cost": st.floats(0, 100)})


@given(st.lists(_usage, max_size=20))
@settings(deadline=None)  # the first example imports Inspect AI: no clock in a test
def test_model_usage_sums_each_models_calls(calls: list[dict[str, Any]]) -> None:
    from inspect_ai.model import ModelUsage

    usage = inspect_logs.model_usage(calls)
    assert set(usage) == {c["model"] for c in calls}
    for model, fields in usage.items():
        mine = [c for c in calls if c["model"] == model]
        ModelUsage(**fields)  # Inspect's own type takes them
        assert fields["input_tokens"] == sum(c["prompt_tokens"] for c in mine)
        assert fields["output_tokens"] == sum(c["completion_tokens"] for c in mine)
        assert fields["total_tokens"] == fields["input_tokens"] + fields["output_tokens"]
        assert fields.get("input_tokens_cache_read") == (
            sum(c["cached_tokens"] for c in mine if "cached_tokens" in c) if any("cached_tokens" in c for c in mine)
            else None)
        assert fields.get("total_cost") == pytest.approx(sum(c["cost"] for c in mine if "cost" in c)) if any(
            "cost" in c for c in mine) else "total_cost" not in fields


def test_each_sample_and_the_log_carry_the_runs_recorded_usage_costed(built: Built, tmp_path: Path) -> None:
    """A run's `run_usage` rows (the agent's, a judge's, a facilitator's calls) are its sample's
    model usage, summed per model, costed at the price of their time; the log's stats sum them all.
    (Written last in this module: it appends usage rows to the shared store.)"""
    from assay.records import Usage
    from assay.service import usage

    usage.set_price(built.store, "gpt-x", prompt=2.0, completion=8.0, actor=OPERATOR)
    run_ids = [t["run_id"] for c in results_json(built.store, built.run, actor=OPERATOR)["cases"]
               for t in c["trials"]][:2]
    usage.record_usage(built.store, run_ids[0], "agent", Usage("gpt-x", 1000, 200, 0, 3, 40))
    usage.record_usage(built.store, run_ids[0], "judge", Usage("judge-y", 50, 5, 0, 1, 10))
    usage.record_usage(built.store, run_ids[1], "agent", Usage("gpt-x", 10, 2, 0, 1, 5))
    (path,) = inspect_logs.export(built.store, tmp_path / "usage", batch_ids=[built.run], actor=OPERATOR)
    log = _read(path)
    by_run = {s.uuid: s for s in log.samples}
    first = by_run[run_ids[0]].model_usage
    assert (first["gpt-x"].input_tokens, first["gpt-x"].output_tokens) == (1000, 200)
    assert first["gpt-x"].total_cost == pytest.approx((1000 * 2.0 + 200 * 8.0) / 1_000_000)
    assert first["judge-y"].input_tokens == 50 and first["judge-y"].total_cost is None  # no price: no cost
    assert by_run[run_ids[1]].model_usage["gpt-x"].input_tokens == 10
    assert all(not s.model_usage for uuid, s in by_run.items() if uuid not in run_ids)
    total = log.stats.model_usage
    assert (total["gpt-x"].input_tokens, total["gpt-x"].output_tokens) == (1010, 202)
    assert total["gpt-x"].total_cost == pytest.approx((1010 * 2.0 + 202 * 8.0) / 1_000_000)
