"""`assay export` and `assay verify` (issue 12, item 6): an untouched export verifies; a changed
value, a dropped line, a reordered or an added row is refused, naming the file and line; an export
whose lines and manifest a forger rewrote to agree is still refused, by the digests and the boards.

The end-to-end test drives `assay` against a store on both backends (its first `verify` through
the real `.venv/bin/assay`, the other commands through the same `main` in this process); the
tampering tests share one export (SQLite) and call the verifier in-process."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.service import accounts, exports
from assay.service.actors import OPERATOR
from assay.service.releases import bootstrap
from assay.service.verify import Finding, verify
from assay.store import Store, open_store
from assay.store.db import head_revisions

from tests.board.test_cli_board import Cli

from ._support import MIXED, lines, populate, reseal, rewrite_rows, submit

pytestmark = pytest.mark.slow  # each builds and exports a populated store: left out of `pytest --pure`


@pytest.fixture
def cli(db_url: str, tmp_path: Path) -> Cli:
    return Cli(db_url, tmp_path)


class Verify:
    """`assay verify` (it takes no --db: it needs no database): the first call through the console
    script itself, in a subprocess; the rest through the same `main` in this process (`Cli`)."""

    def __init__(self, cli: Cli) -> None:
        self.cli = cli
        self.real_done = False

    def __call__(self, directory: Path, expect: int) -> str:
        if self.real_done:
            done = self.cli._in_process(("verify", str(directory)), db=False)
            code, stdout, stderr = done.code, done.stdout, done.stderr
        else:
            code, stdout, stderr = self._subprocess(directory)
            self.real_done = True
        assert code == expect, (code, stdout, stderr)
        assert "Traceback" not in stderr
        text = stdout if expect == 0 else stderr
        assert len(text.strip().splitlines()) == 1, text
        return text.strip()

    def _subprocess(self, directory: Path) -> tuple[int, str, str]:
        import os
        import subprocess

        from tests.board.test_cli_board import ASSAY

        env = {k: v for k, v in os.environ.items() if k != "ASSAY_DB"}
        proc = subprocess.run([str(ASSAY), "verify", str(directory)], cwd=self.cli.cwd, env=env,
                              capture_output=True, text=True, timeout=300)
        return proc.returncode, proc.stdout, proc.stderr


def test_export_then_verify_through_the_cli_and_every_refusal(cli: Cli, tmp_path: Path) -> None:
    for name in ("alice", "bob", "carol"):
        cli("account", "create", name, "--public-handle", name.title())
    for agent, who in (("reference:diligent", "alice"), (MIXED, "bob"), ("reference:idle", "carol")):
        cli("submit", "forge", "--agent", agent, "--account", who, "--label", who, "--publish")
    cli("submit", "academy", "--agent", "reference:steadfast", "--account", "alice", "--label", "steady",
        "--publish", "--judge", "rules")
    board = cli("board", "forge", "--json").json()
    assert all(len(e["digest"]) == 64 for e in board["entries"]) and len(board["entries"]) == 3
    check = Verify(cli)

    whole = tmp_path / "whole"
    done = cli("export", "--out", str(whole))
    assert "FULL EXPORT: CONTAINS SECRETS" in done.stderr  # said at once, on stderr
    summary = check(whole, 0)
    assert summary.startswith("ok: ") and "8 digests recomputed and equal" in summary  # versions 1 and 2
    manifest = json.loads((whole / "manifest.json").read_text(encoding="utf-8"))
    assert {manifest["schema_revision"]} == head_revisions() and manifest["harness_version"] == "assay-harness/1"
    for entry in manifest["files"]:
        data = (whole / entry["file"]).read_bytes()
        assert entry["rows"] == data.count(b"\n") == len(entry["lines"])
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert {p.name for p in whole.iterdir()} == {"manifest.json", "README.txt", *(f["file"] for f in manifest["files"])}
    assert manifest["kind"] == "full" and manifest["contains_secrets"] is True
    top = (whole / "manifest.json").read_text(encoding="utf-8").splitlines()[1]
    assert top.startswith(' "NOTICE": "FULL EXPORT: CONTAINS SECRETS'), top
    assert (whole / "README.txt").read_text(encoding="utf-8").startswith("FULL EXPORT: CONTAINS SECRETS")
    assert set(manifest["excluded"]) == set(exports.EXCLUDED) and not set(manifest["excluded"]) & {
        f["table"] for f in manifest["files"]}
    served = {(b["suite"], b["version"]): b["board"] for b in manifest["boards"]}
    assert served[("forge", "1.0")] == board
    assert served[("academy", "1.2")]["entries"][0]["composite"] is not None

    forge = tmp_path / "forge"
    cli("export", "--out", str(forge), "--suite", "forge")
    assert check(forge, 0).startswith("ok: ")
    scoped = json.loads((forge / "manifest.json").read_text(encoding="utf-8"))
    assert [(b["suite"], b["version"]) for b in scoped["boards"]] == [("forge", "1.0")]
    releases = [json.loads(line) for line in (forge / "suite_releases.jsonl").read_text().splitlines()]
    assert {r["suite_key"] for r in releases} == {"forge"}
    assert not (forge / "panel_runs.jsonl").exists()
    counts = {f["table"]: f["rows"] for f in scoped["files"]}
    assert counts["submissions"] == 3 and counts["runs"] == 45 and counts["judge_passes"] == 0

    # a changed value: exit 1, naming the file and the line
    changed = tmp_path / "changed"
    shutil.copytree(whole, changed)
    rows = lines(changed / "runs.jsonl")
    rows[4] = rows[4].replace(b'"status":"completed"', b'"status":"timeout"', 1)
    (changed / "runs.jsonl").write_bytes(b"".join(rows))
    assert check(changed, 1) == "assay: verify failed: runs.jsonl line 5: changed: not the row the export wrote at this line"
    # a dropped line
    dropped = tmp_path / "dropped"
    shutil.copytree(whole, dropped)
    rows = lines(dropped / "check_outcomes.jsonl")
    (dropped / "check_outcomes.jsonl").write_bytes(b"".join(rows[:7] + rows[8:]))
    assert check(dropped, 1) == ("assay: verify failed: check_outcomes.jsonl line 8: a row is missing here: "
                                 "the export's line 8 is gone")

    # bad input: one line, exit 2, nothing written
    assert check(tmp_path / "nowhere", 2).endswith("nowhere: no such directory")
    assert "holds no manifest.json" in check(cli.cwd, 2)
    assert "not empty" in cli.refused("export", "--out", str(whole))
    assert "--suite ghost" in cli.refused("export", "--out", str(tmp_path / "ghost"), "--suite", "ghost")
    assert not (tmp_path / "ghost").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging directory left


# -- one export, tampered with in every way (SQLite, in-process) ----------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("export")
    store = open_store(f"sqlite:///{root / 'assay.db'}")
    try:
        bootstrap(store)
        populate(store)
        exports.export(store, root / "out", actor=OPERATOR)
    finally:
        store.close()
    yield root / "out"


@pytest.fixture
def copy(exported: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(exported, target)
    return target


def _found(root: Path) -> Finding:
    report = verify(root)
    assert not report.ok, report.summary()
    assert report.finding is not None
    return report.finding


def test_the_untouched_export_verifies(exported: Path) -> None:
    report = verify(exported)
    assert report.ok, report.summary()
    assert (report.digests, report.unstamped, report.entries) == (10, 0, 4)  # versions 1 and 2


def test_a_reordered_pair_of_rows_is_named_where_it_moved(copy: Path) -> None:
    rows = lines(copy / "planned_runs.jsonl")
    rows[9], rows[10] = rows[10], rows[9]
    (copy / "planned_runs.jsonl").write_bytes(b"".join(rows))
    assert _found(copy) == Finding("planned_runs.jsonl", 10, "a row out of place: the export wrote it at line 11")


def test_an_added_row_is_named(copy: Path) -> None:
    rows = lines(copy / "publication_events.jsonl")
    extra = json.loads(rows[-1])
    extra["id"] += 100
    rows.append(json.dumps(extra, sort_keys=True, separators=(",", ":")).encode() + b"\n")
    (copy / "publication_events.jsonl").write_bytes(b"".join(rows))
    found = _found(copy)
    assert (found.file, found.line) == ("publication_events.jsonl", len(rows))
    assert "did not write" in found.problem


def test_a_duplicated_row_and_a_row_in_another_form_are_named(copy: Path) -> None:
    rows = lines(copy / "run_sweeps.jsonl")
    (copy / "run_sweeps.jsonl").write_bytes(b"".join(rows[:3] + [rows[2]] + rows[3:]))
    assert _found(copy) == Finding("run_sweeps.jsonl", 4, "the same primary key as the line before")
    rows[2] = json.dumps(json.loads(rows[2]), indent=1).replace("\n", " ").encode() + b"\n"
    (copy / "run_sweeps.jsonl").write_bytes(b"".join(rows))
    assert _found(copy) == Finding("run_sweeps.jsonl", 3, "not in canonical form (RFC 8785), as the export writes "
                                                          "every row")


def test_a_missing_file_an_unlisted_file_and_a_truncated_file_are_named(copy: Path) -> None:
    (copy / "notes.jsonl").write_text("{}\n")
    assert _found(copy) == Finding("notes.jsonl", None, "a file the manifest does not list: the export wrote no such "
                                                       "file")
    (copy / "notes.jsonl").unlink()
    rows = lines(copy / "win_condition_outcomes.jsonl")
    (copy / "win_condition_outcomes.jsonl").write_bytes(b"".join(rows[:-2]))
    found = _found(copy)
    assert (found.file, found.line) == ("win_condition_outcomes.jsonl", len(rows) - 1)
    assert found.problem.startswith("missing: the file ends after")
    (copy / "win_condition_outcomes.jsonl").unlink()
    assert _found(copy).problem.startswith("missing: the export wrote it with")


def test_a_resealed_change_to_a_run_is_caught_by_its_digest(copy: Path) -> None:
    """A forger who rewrites the manifest's hashes makes every line "as exported"; the run no
    longer adds up to the digest its submission was stamped with when finalised."""
    first = json.loads(lines(copy / "runs.jsonl")[0])
    rewrite_rows(copy, "runs", lambda r: {**r, "claimed_success": not r["claimed_success"]}
                 if r["run_id"] == first["run_id"] else r)
    reseal(copy)
    found = _found(copy)
    assert found.file == "submission_digests.jsonl" and found.line is not None
    assert "its exported rows add up to digest" in found.problem


def test_a_resealed_check_outcome_and_a_resealed_digest_are_caught(copy: Path, tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    shutil.copytree(copy, backup)
    rewrite_rows(copy, "check_outcomes", lambda r: {**r, "passed": True})
    reseal(copy)
    assert _found(copy).file == "submission_digests.jsonl"
    # rewrite the digests to match the forged rows: the verdict rows the scorer wrote disagree now
    shutil.rmtree(copy)
    shutil.copytree(backup, copy)
    rewrite_rows(copy, "check_outcomes", lambda r: {**r, "passed": True})
    _restamp(copy)
    reseal(copy)
    found = _found(copy)
    assert found.file == "run_verdicts.jsonl" and found.line is not None
    assert "the oracle's verdict on its check outcomes is" in found.problem, found
    # rewrite the verdict rows to the oracle's verdict on the forged outcomes too: the boards they
    # were served with disagree now
    shutil.rmtree(copy)
    shutil.copytree(backup, copy)
    rewrite_rows(copy, "check_outcomes", lambda r: {**r, "passed": True})
    _rescore(copy)
    _restamp(copy)
    reseal(copy)
    found = _found(copy)
    assert found.file == "manifest.json" and "on the board; the rows give" in found.problem, found


def test_a_resealed_verdict_row_is_caught_by_the_rule(copy: Path) -> None:
    """Verdict rows are not digested (they derive from the digested outcomes): a forged one is
    caught because it is not the oracle's verdict on its run's check outcomes."""
    rewrite_rows(copy, "run_verdicts", lambda r: {**r, "passed": not r["passed"]} if r["score"] < 75 else r)
    reseal(copy)
    found = _found(copy)
    assert found.file == "run_verdicts.jsonl" and found.line is not None
    assert "passed is true, but the oracle's verdict on its check outcomes is false" in found.problem, found


def test_a_recorded_run_without_its_verdict_row_is_caught(copy: Path) -> None:
    rows = lines(copy / "run_verdicts.jsonl")
    (copy / "run_verdicts.jsonl").write_bytes(b"".join(rows[1:]))
    reseal(copy)
    found = _found(copy)
    assert found.file == "runs.jsonl" and found.line == 1 and "has no verdict row" in found.problem, found


def test_a_resealed_unpublication_or_a_dropped_submission_is_caught_by_the_board(copy: Path) -> None:
    rewrite_rows(copy, "publication_events", lambda r: {**r, "published": False})
    reseal(copy)
    found = _found(copy)
    assert found.file == "manifest.json" and "is on the board, but its rows do not put it there" in found.problem


def test_a_resealed_row_of_no_plan_is_caught(copy: Path) -> None:
    rows = [json.loads(r) for r in lines(copy / "runs.jsonl")]
    stray = {**rows[-1], "run_id": "f" * 32}
    rewrite_rows(copy, "runs", lambda r: r)
    (copy / "runs.jsonl").write_bytes((copy / "runs.jsonl").read_bytes()
                                      + json.dumps(stray, sort_keys=True, separators=(",", ":"),
                                                   ensure_ascii=False).encode() + b"\n")
    reseal(copy)
    found = _found(copy)
    assert (found.file, found.line) == ("runs.jsonl", len(rows) + 1) and "no exported plan holds" in found.problem


def test_a_manifest_changed_or_reformatted_is_caught(copy: Path) -> None:
    text = (copy / "manifest.json").read_text(encoding="utf-8")
    (copy / "manifest.json").write_text(text.replace('"harness_version": "assay-harness/1"',
                                                     '"harness_version": "assay-harness/2"'), encoding="utf-8")
    found = _found(copy)
    assert found.file == "manifest.json" and "manifest_sha256" in found.problem
    (copy / "manifest.json").write_text(text.replace('\n "boards"', '\n  "boards"'), encoding="utf-8")
    found = _found(copy)
    boards_line = next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(' "boards"'))
    assert found.file == "manifest.json" and found.line == boards_line and "formatting" in found.problem
    (copy / "manifest.json").write_text(text[:-30], encoding="utf-8")
    found = _found(copy)
    assert found.file == "manifest.json" and found.line is not None and found.problem.startswith("not JSON")


def _rescore(root: Path) -> None:
    """Rewrite every verdict row as the oracle's verdict on the (forged) check outcomes."""
    from assay.score.oracle import run_verdict
    from assay.service.verify import outcomes

    read = lambda name: [json.loads(line) for line in (root / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]  # noqa: E731
    runs = {r["run_id"]: r for r in read("runs")}
    checks: dict[str, list[dict[str, Any]]] = {}
    for c in read("check_outcomes"):
        checks.setdefault(c["run_id"], []).append(c)

    def rescored(row: dict[str, Any]) -> dict[str, Any]:
        run = runs[row["run_id"]]
        v = run_verdict(outcomes(sorted(checks.get(row["run_id"], []), key=lambda c: c["ordinal"])), run["status"],
                        run["claimed_success"])
        return {**row, "score": v.score, "passed": v.passed, "safety_failures": len(v.safety_failures),
                "false_success": v.false_success}

    rewrite_rows(root, "run_verdicts", rescored)


def _restamp(root: Path) -> None:
    """Recompute every digest (both versions) from the (forged) rows, as a forger with the source would."""
    from assay.stats.digest import group_by_submission, submission_digest, with_commitments

    tables = {}
    for path in root.glob("*.jsonl"):
        tables[path.stem] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    grouped = group_by_submission(tables)
    subs = {r["id"]: r for r in tables["submissions"]}
    rel = {r["id"]: r for r in tables["suite_releases"]}
    era = {r["submission_id"]: r["measurement_era"] for r in tables["submission_finalisations"]}
    rewrite_rows(root, "submission_digests", lambda r: {
        **r, "digest": submission_digest(rel[subs[r["submission_id"]]["release_id"]], era[r["submission_id"]],
                                         grouped[r["submission_id"]], version=1)})
    salts = {r["run_id"]: r["salt"] for r in tables["seed_salts"]}

    def v2(sid: str) -> str:
        rows = {**grouped[sid], "planned_runs": with_commitments(grouped[sid]["planned_runs"], salts)}
        return submission_digest(rel[subs[sid]["release_id"]], era[sid], rows, version=2)

    rewrite_rows(root, "digest_stamps", lambda r: {**r, "digest": v2(r["submission_id"])})


def test_an_export_of_a_store_with_a_changed_row_does_not_verify(tmp_path: Path) -> None:
    """Someone with the database's superuser disables the triggers and edits a finalised run: the
    store's own export no longer adds up to the digest stamped before."""
    store = open_store(f"sqlite:///{tmp_path / 'assay.db'}")
    try:
        bootstrap(store)
        accounts.create(store, "alice", "Alice", actor=OPERATOR)
        submit(store, "forge", "reference:idle", "alice", "idle")
        _edit_behind_the_triggers(store)
        exports.export(store, tmp_path / "out", actor=OPERATOR)
    finally:
        store.close()
    found = _found(tmp_path / "out")
    assert found.file == "submission_digests.jsonl" and found.line == 1


def _edit_behind_the_triggers(store: Store) -> None:
    import sqlalchemy as sa

    with store.engine.begin() as conn:
        conn.execute(sa.text("DROP TRIGGER runs_append_only_update"))
        conn.execute(sa.text("UPDATE runs SET reason = 'edited' WHERE run_id = (SELECT MIN(run_id) FROM runs)"))


def test_a_resealed_value_of_the_wrong_type_is_named_not_a_traceback(copy: Path) -> None:
    rewrite_rows(copy, "planned_runs", lambda r: {**r, "slot": str(r["slot"])} if r["slot"] == 3 else r)
    reseal(copy)
    found = _found(copy)
    assert found.file == "planned_runs.jsonl" and found.line is not None
    assert found.problem == 'slot holds "3", not a value of the column\'s type'


def test_a_resealed_rubric_that_is_no_rubric_is_a_finding_not_a_traceback(copy: Path) -> None:
    rewrite_rows(copy, "release_rubrics", lambda r: {**r, "document": {"not": "a rubric"}})
    reseal(copy)
    found = _found(copy)
    assert found.file == "manifest.json" and found.problem.startswith("its rows cannot be recounted")
