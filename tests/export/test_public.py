"""Exports in two kinds (issue 23, item 2): a public export holds only what the public may see —
published, listed entries of public suites, seed commitments instead of seeds, public handles
instead of account names, no scenario document — and still verifies: every version-2 digest and
every board figure is recomputed from it, and one changed byte anywhere is named by file and line.

One store per backend (module-scoped) holds every kind of thing a public export must leave out:
an unpublished, an unlisted (bring your own key), an incomplete (one run crashed) and an internal
suite's submission, an `assay run` batch, accounts with private names, an admin and a panel
applicant with their emails. Every byte of the public export is scanned for every secret."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from assay.canonical import canonical_bytes
from assay.errors import BadInput, Forbidden, NotFound
from assay.service import admins, exports, panel, releases, submissions
from assay.service.actors import OPERATOR, PUBLIC
from assay.service.runs import run_suite
from assay.service.verify import verify
from assay.stats.commitment import opens, seed_commitment
from assay.stats.digest import PARTS_V2
from assay.store import Store, open_store
from assay.store.digest_schema import seed_salts
from assay.store.schema import batches, metadata, planned_runs, scenario_versions

from tests.board._support import account, flaky, mini_suite, submit
from tests.support.databases import backend_url

pytestmark = pytest.mark.slow  # its fixtures play and store whole batches: left out of `pytest --pure`

ADMIN_EMAIL = "root-admin-secret@example.org"
APPLICANT_EMAIL = "applicant-secret@example.org"
#: account name -> public handle (None: no handle)
ACCOUNTS = {"acct-secret-zelda": "Zed", "acct-secret-xena": "Xena", "acct-secret-yuri": "Yuri",
            "acct-secret-uma": "Uma", "acct-secret-ivan": "Ivan", "acct-secret-nohandle": None}
RUN_SEED = 918273645546372819


@dataclass
class Built:
    store: Store
    root: Path
    ids: dict[str, str]
    adhoc: str
    public: Path
    full: Path


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    root = tmp_path_factory.mktemp("public")
    with backend_url(request, root, prefix="pub") as url:
        store = open_store(url)
        try:
            yield _build(store, root)
        finally:
            store.close()


def _build(store: Store, root: Path) -> Built:
    mini = mini_suite(root / "mini", reps=1)
    releases.release_path(store, str(mini), actor=OPERATOR)
    hidden = mini_suite(root / "hidden", key="hidden", visibility="internal", reps=1)
    releases.release_path(store, str(hidden), actor=OPERATOR)
    for name, handle in ACCOUNTS.items():
        account(store, name, handle)
    ids = {
        "listed": submit(store, "mini", agent="reference:diligent", account="acct-secret-zelda", publish=True),
        "listed2": submit(store, "mini", agent="reference:hasty", account="acct-secret-xena", publish=True),
        "unpublished": submit(store, "mini", agent="reference:diligent", account="acct-secret-yuri"),
        "unlisted": submit(store, "mini", agent="reference:diligent", account="acct-secret-uma", publish=True,
                           byok=True, unlisted=True),
        "incomplete": submit(store, "mini", agent=flaky("CrashOnce"), account="acct-secret-ivan", publish=True),
        "internal": submit(store, "hidden", agent="reference:diligent", account="acct-secret-zelda", publish=True),
    }
    adhoc = run_suite(str(mini), agent_spec="reference:diligent", trials=1, seed=RUN_SEED, store=store).batch_id
    admins.create(store, ADMIN_EMAIL, "a long enough password 1", actor=OPERATOR)
    panel.apply(store, {"email": APPLICANT_EMAIL, "specialty": "sre", "years_experience": 3,
                        "statement": "applicant statement secret"}, actor=PUBLIC)
    public, full = root / "public", root / "full"
    exports.export(store, public, public=True, actor=OPERATOR)
    exports.export(store, full, actor=OPERATOR)
    return Built(store, root, ids, adhoc, public, full)


def _rows(root: Path, table: str) -> list[dict[str, Any]]:
    path = root / f"{table}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def _secrets(store: Store) -> dict[str, list[str]]:
    """Every value a public export must not hold, by kind, read from the store itself."""
    with store.engine.connect() as conn:
        seeds = [str(s) for s in conn.execute(sa.select(planned_runs.c.seed)).scalars()]
        base_seeds = [str(s) for s in conn.execute(sa.select(batches.c.base_seed)).scalars() if s]
        salts = list(conn.execute(sa.select(seed_salts.c.salt)).scalars())
        documents = list(conn.execute(sa.select(scenario_versions.c.document)).scalars())
    truths = [d["hidden_truth"].strip() for d in documents]
    truths += [line.strip() for t in truths for line in t.splitlines() if len(line.strip()) > 20]
    predicates = [canonical_bytes(c["expect"]).decode() for d in documents for c in d["checks"]]
    predicates += [c["description"] for d in documents for c in d["checks"]]
    return {"seed": seeds, "base seed": base_seeds, "salt": salts, "hidden truth": truths,
            "check predicate": predicates, "account name": list(ACCOUNTS),
            "email": [ADMIN_EMAIL, APPLICANT_EMAIL], "statement": ["applicant statement secret"]}


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_the_public_export_holds_no_secret_anywhere(built: Built) -> None:
    secrets = _secrets(built.store)
    assert len(secrets["seed"]) == 6 * 2 + 2 and all(len(s) >= 12 for s in secrets["seed"])
    assert str(RUN_SEED) in secrets["seed"] and secrets["hidden truth"] and secrets["check predicate"]
    data = {p.name: p.read_bytes() for p in built.public.iterdir()}
    for kind, values in secrets.items():
        for value in values:
            for needle in _forms(value):
                for name, content in data.items():
                    assert needle not in content, f"{kind} {value[:40]!r} in {name}"
    # and the full export does hold them (the scan can find what it looks for)
    full = b"".join(p.read_bytes() for p in built.full.iterdir())
    for kind in ("seed", "salt", "hidden truth", "check predicate", "account name"):
        assert all(any(f in full for f in _forms(v)) for v in secrets[kind]), kind


def _forms(value: str) -> set[bytes]:
    """A value as raw text and as it reads inside a JSON string."""
    return {value.encode("utf-8"), json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8")}


def test_the_public_export_holds_the_listed_entries_only(built: Built) -> None:
    listed = sorted([built.ids["listed"], built.ids["listed2"]])
    assert sorted(r["id"] for r in _rows(built.public, "submissions")) == listed
    assert sorted(r["id"] for r in _rows(built.public, "batches")) == listed
    assert {r["batch_id"] for r in _rows(built.public, "planned_runs")} == set(listed)
    assert len(_rows(built.public, "runs")) == len(_rows(built.public, "planned_runs")) == 4
    everything = b"".join(p.read_bytes() for p in built.public.iterdir())
    for left_out in ("unpublished", "unlisted", "incomplete", "internal"):
        assert built.ids[left_out].encode() not in everything, left_out
    assert built.adhoc.encode() not in everything
    assert {r["suite_key"] for r in _rows(built.public, "suite_releases")} == {"mini"}
    assert {r["visibility"] for r in _rows(built.public, "suite_releases")} == {"public"}
    # handles, never names; commitments, never seeds; hashes, never documents
    assert {r["public_handle"] for r in _rows(built.public, "submissions")} == {"Zed", "Xena"}
    assert all("account" not in r for r in _rows(built.public, "submissions"))
    assert all("seed" not in r and len(r["seed_commitment"]) == 64 for r in _rows(built.public, "planned_runs"))
    assert all("document" not in r and len(r["content_hash"]) == 64 for r in _rows(built.public, "scenario_versions"))
    manifest = json.loads((built.public / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["kind"], manifest["contains_secrets"]) == ("public", False)
    written = {f["table"] for f in manifest["files"]}
    assert written == set(exports.PUBLIC_COLUMNS)
    assert not {"accounts", "account_handles", "seed_salts", "submission_digests", "admins", "panel_applications",
                "api_keys", "run_claims"} & written
    assert set(manifest["excluded"]) | written == set(metadata.tables)
    for entry in manifest["files"]:
        assert entry["columns"] == list(exports.PUBLIC_COLUMNS[entry["table"]])
    assert [(b["suite"], b["version"]) for b in manifest["boards"]] == [("mini", "1.0")]
    assert sorted(e["submission_id"] for e in manifest["boards"][0]["board"]["entries"]) == listed
    assert (built.public / "README.txt").read_text(encoding="utf-8").startswith("PUBLIC EXPORT")


def test_the_public_export_verifies_digests_and_boards(built: Built) -> None:
    report = verify(built.public)
    assert report.ok, report.summary()
    assert (report.digests, report.unstamped, report.boards, report.entries) == (2, 0, 1, 2)
    # the boards' digests are the version-2 stamps, recomputed from the public rows
    entries = json.loads((built.public / "manifest.json").read_text())["boards"][0]["board"]["entries"]
    stamps = {r["submission_id"]: r["digest"] for r in _rows(built.public, "digest_stamps")}
    assert {e["submission_id"]: e["digest"] for e in entries} == stamps
    # the full export verifies too: version 1 and 2 of every finalised submission
    full = verify(built.full)
    assert full.ok, full.summary()
    assert full.digests == 2 * len(_rows(built.full, "digest_stamps")) >= 2 * 5


def test_every_planned_run_has_its_own_salt_drawn_with_its_plan(built: Built) -> None:
    with built.store.engine.connect() as conn:
        runs = set(conn.execute(sa.select(planned_runs.c.run_id)).scalars())
        salted = {r.run_id: r.salt for r in conn.execute(sa.select(seed_salts))}
    assert len(runs) == 7 * 2 and set(salted) == runs and len(set(salted.values())) == len(runs)


def test_the_commitments_open_with_the_owners_seed_and_salt(built: Built) -> None:
    sid = built.ids["listed"]
    view = submissions.results(built.store, sid, actor=OPERATOR)
    public = {r["run_id"]: r["seed_commitment"] for r in _rows(built.public, "planned_runs")}
    assert len(view["runs"]) == 2
    for run in view["runs"]:
        assert len(run["seed_salt"]) == 64 and run["seed_commitment"] == public[run["run_id"]]
        assert run["seed_commitment"] == seed_commitment(run["seed"], run["seed_salt"])
        assert opens(public[run["run_id"]], run["seed"], run["seed_salt"])
        assert not opens(public[run["run_id"]], run["seed"] + 1, run["seed_salt"])
    # another account never sees the owner's view (seeds and salts)
    from assay.service.actors import account_actor

    with pytest.raises(NotFound):
        submissions.results(built.store, sid, actor=account_actor("acct-secret-xena"))


def _flipped(root: Path, target: Path, name: str, offset: int) -> None:
    shutil.copytree(root, target)
    data = bytearray((root / name).read_bytes())
    data[offset] = data[offset] ^ 0x01 if data[offset] not in (0x0A,) else 0x20
    (target / name).write_bytes(bytes(data))


def test_one_byte_changed_in_any_file_is_named_with_its_line(built: Built, tmp_path: Path) -> None:
    """Every file of the public export, at two places: its middle and a place of its own."""
    names = sorted(p.name for p in built.public.iterdir() if p.stat().st_size > 0)
    assert {"manifest.json", "README.txt", "planned_runs.jsonl", "runs.jsonl", "submissions.jsonl"} <= set(names)
    n = 0
    for name in names:
        size = (built.public / name).stat().st_size
        for offset in sorted({size // 2, (len(name) * 7919) % size}):
            target = tmp_path / f"flip{n}"
            n += 1
            _flipped(built.public, target, name, offset)
            report = verify(target)
            assert not report.ok and report.finding is not None, (name, offset)
            assert report.finding.file == name, (name, offset, report.finding)
            if name != "manifest.json":
                line = (built.public / name).read_bytes().count(b"\n", 0, offset) + 1
                assert report.finding.line in (line, line + 1), (name, offset, report.finding)
            shutil.rmtree(target)


@pytest.mark.heavy  # starts a process
def test_the_cli_writes_both_kinds_and_verify_exits_0_then_1(built: Built, tmp_path: Path) -> None:
    from tests.board.test_cli_board import ASSAY, Cli

    cli = Cli(built.store.url, tmp_path)
    done = cli("export", "--public", "--suite", "mini", "--out", str(tmp_path / "pub"))
    assert "SECRETS" not in done.stderr and "(public export)" in done.stdout
    assert "no public release" in cli.refused("export", "--public", "--suite", "hidden", "--out", str(tmp_path / "h"))
    assert not (tmp_path / "h").exists()
    assert verify(tmp_path / "pub").ok
    # the owner's view on the command line: each run's seed, salt and the commitment they open
    view = cli("results", built.ids["listed"], "--json").json()
    public = {r["run_id"]: r["seed_commitment"] for r in _rows(tmp_path / "pub", "planned_runs")}
    assert all(opens(public[r["run_id"]], r["seed"], r["seed_salt"]) for r in view["runs"]) and view["runs"]
    if built.store.dialect != "sqlite":
        return  # the console script's exit codes need no second backend: verify reads files only
    proc = subprocess.run([str(ASSAY), "verify", str(tmp_path / "pub")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("ok: "), proc
    rows = (tmp_path / "pub" / "planned_runs.jsonl").read_bytes()
    (tmp_path / "pub" / "planned_runs.jsonl").write_bytes(rows.replace(b'"trial":1', b'"trial":2', 1))
    proc = subprocess.run([str(ASSAY), "verify", str(tmp_path / "pub")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "planned_runs.jsonl line 1:" in proc.stderr, proc


def test_only_staff_writes_a_full_export_and_anyone_a_public_one(built: Built, tmp_path: Path) -> None:
    with pytest.raises(Forbidden):
        exports.export(built.store, tmp_path / "x", actor=PUBLIC)
    with pytest.raises(NotFound):
        exports.export(built.store, tmp_path / "y", suite="hidden", public=True, actor=PUBLIC)
    with pytest.raises(NotFound):
        exports.export(built.store, tmp_path / "y", suite="mini", version="9.9", public=True, actor=PUBLIC)
    with pytest.raises(BadInput):
        exports.export(built.store, tmp_path / "y", suite="mini", version="1.0", actor=OPERATOR)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
def test_the_service_serves_the_public_export_of_a_suite_version(built: Built, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from tests.web.conftest import issue_key, make_app

    with TestClient(make_app(built.store, rate_limit=0)) as client:
        page = client.get("/suites/mini")
        assert page.status_code == 200 and 'href="/api/suites/mini/1.0/export"' in page.text
        assert "assay verify DIR" in page.text
        answer = client.get("/api/suites/mini/1.0/export")
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/gzip"
        for missing in ("/api/suites/hidden/1.0/export", "/api/suites/mini/9.9/export", "/api/suites/nope/1/export"):
            refused = client.get(missing)
            assert refused.status_code == 404 and "detail" in refused.json(), missing
        # the owner's view over the API holds each run's seed, salt and commitment
        key = issue_key(built.store, "acct-secret-zelda", "api")
        owner = client.get(f"/api/submissions/{built.ids['listed']}", headers={"Authorization": f"Bearer {key}"})
        assert owner.status_code == 200, owner.text
        for run in owner.json()["runs"]:
            assert opens(run["seed_commitment"], run["seed"], run["seed_salt"])
    with tarfile.open(fileobj=io.BytesIO(answer.content), mode="r:gz") as tar:
        assert {m.name.split("/")[0] for m in tar.getmembers()} == {"assay-export-mini-1.0"}
        tar.extractall(tmp_path, filter="data")
    unpacked = tmp_path / "assay-export-mini-1.0"
    report = verify(unpacked)
    assert report.ok and report.entries == 2, report.summary()
    manifest = json.loads((unpacked / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["kind"], manifest["suite"], manifest["version"]) == ("public", "mini", "1.0")
    assert not list(Path(tmp_path).glob("assay-public-export-*"))


def test_version_2_digests_cover_what_the_public_export_holds() -> None:
    """Every version-2 column is one a public export writes, and no secret column is among them."""
    for part in PARTS_V2:
        assert set(part.columns) <= set(exports.PUBLIC_COLUMNS[part.table]), part.table
    secret = {("planned_runs", "seed"), ("batches", "base_seed"), ("batches", "agent_spec"), ("submissions", "account"),
              ("batch_agents", "options"), ("batch_agents", "load_spec"), ("batch_facilitators", "base_url"),
              ("runs", "final_state"), ("scenario_versions", "document")}
    for table, columns in exports.PUBLIC_COLUMNS.items():
        assert not {(table, c) for c in columns} & secret, table


def test_a_resealed_commitment_or_run_in_a_public_export_is_caught_by_its_digest(built: Built, tmp_path: Path) -> None:
    """A forger who rewrites rows and the manifest's hashes to agree: the version-2 digests, which
    cover the commitments and the runs, no longer add up."""
    from ._support import reseal, rewrite_rows

    first = _rows(built.public, "planned_runs")[0]["run_id"]
    for table, change in (("planned_runs", lambda r: {**r, "seed_commitment": "0" * 64}),
                          ("runs", lambda r: {**r, "claimed_success": not r["claimed_success"]})):
        target = tmp_path / table
        shutil.copytree(built.public, target)
        rewrite_rows(target, table, lambda r, change=change: change(r) if r["run_id"] == first else r)
        reseal(target)
        found = verify(target).finding
        assert found is not None and found.file == "digest_stamps.jsonl" and found.line is not None, found
        assert "add up to digest" in found.problem
