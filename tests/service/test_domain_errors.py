"""Domain errors, not CLI errors: the catalogue of refusals (docs/architecture.md, Errors).

`service/` and `store/` refuse with `NotFound`, `Conflict`, `Forbidden` or `Invalid`, naming the
domain field at fault and never a flag. Each refusal of the catalogue is made twice against one
SQLite store: through the real CLI entry point (`assay.cli.main`), where it must be one stderr
line naming its flag, exit 2, and nothing stored changed; and through the service function the
CLI calls, where it must be the right kind of domain error, with the right HTTP status, and a
message without a flag in it.

Not yet in the catalogue: refusals that depend on who is asking (unpublishing someone else's
submission is `Forbidden`, or `NotFound` when it is not visible to them) need the Actor, which
does not exist yet.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import hashlib
import signal
import sqlite3
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from assay.agents.loader import load_agent
from assay.errors import BadInput, Conflict, DomainError, Forbidden, Invalid, NotFound, http_status
from assay.run.executors import make_executor
from assay.service import accounts, batches, execution, platform_config, releases, results, submissions
from assay.service.board import board
from assay.service.board import entry as board_entry
from assay.service.runs import run_suite
from assay.store import Store
from assay.store.db import open_store

from tests.board._support import edit_scenario, mini_suite

pytestmark = pytest.mark.slow  # its fixtures play and store whole batches: left out of `pytest --pure`

STATUS = {NotFound: 404, Conflict: 409, Forbidden: 403, Invalid: 422}
LONG_NOTE = "x" * 2001
LONG_MODEL = "m" * 201


@dataclass
class World:
    url: str
    path: Path
    store: Store
    changed_suite: Path
    submission: str  # alice's, not published
    batch: str  # a run batch of reference:idle


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("domain-errors")
    path = root / "assay.db"
    url = f"sqlite:///{path}"
    store = open_store(url)
    releases.release_path(store, str(mini_suite(root / "mini")), actor=OPERATOR)
    releases.bootstrap(store)
    changed = mini_suite(root / "changed")
    edit_scenario(changed)
    accounts.create(store, "alice", "Alice", actor=OPERATOR)
    accounts.create(store, "bob", actor=OPERATOR)
    platform_config.set_value(store, platform_config.SUBMISSION_CAP, {"max_per_account_per_version": 1}, actor=OPERATOR)
    platform_config.add_era(store, "e1", "2020-01-01", "the first era", actor=OPERATOR)
    sid = submissions.submit(store, "mini", factory=load_agent("reference:idle"), account="alice", label="idle",
                             workers=2, actor=OPERATOR)
    batch = run_suite("forge", agent_spec="reference:idle", trials=1, workers=2, store=store).batch_id
    return World(url, path, store, changed, sid, batch)


@dataclass(frozen=True)
class Refusal:
    """One refusal: the CLI arguments (`{sub}`, `{batch}`, `{changed}` filled in), what the line must
    name, and the same refusal made through the service layer."""

    args: tuple[str, ...]
    names: str
    kind: type[DomainError]
    service: Callable[[World], Any]


def _submit(w: World, **kw: Any) -> Any:
    args: dict[str, Any] = {"account": "bob", "label": "x", **kw}
    key = args.pop("key", "mini")
    return submissions.submit(w.store, key, factory=load_agent("reference:idle"), **args, actor=OPERATOR)


SUBMIT = ("submit", "mini", "--agent", "reference:idle")

CATALOGUE: dict[str, Refusal] = {
    # -- NotFound: 404 ---------------------------------------------------------------------------
    "no-such-account": Refusal((*SUBMIT, "--account", "ghost", "--label", "x"), "--account ghost", NotFound,
                               lambda w: _submit(w, account="ghost")),
    "no-such-entry": Refusal(("entry", "0" * 32), "0" * 32, NotFound,
                             lambda w: board_entry(w.store, "0" * 32, actor=OPERATOR)),
    "no-such-suite": Refusal(("submit", "nope", "--agent", "reference:idle", "--account", "bob", "--label", "x"),
                             "no released suite 'nope'", NotFound, lambda w: _submit(w, key="nope")),
    "no-such-version": Refusal(("board", "mini", "--version", "9.9"), "--version", NotFound,
                               lambda w: board(w.store, "mini", "9.9", actor=OPERATOR)),
    "no-such-submission": Refusal(("unpublish", "f" * 32), "f" * 32, NotFound,
                                  lambda w: submissions.unpublish(w.store, "f" * 32, actor=OPERATOR)),
    "no-such-run": Refusal(("debrief", "nosuchrun"), "nosuchrun", NotFound,
                           lambda w: results.debrief(w.store, "nosuchrun", actor=OPERATOR)),
    "run-prefix-too-short": Refusal(("replay", "abc"), "abc", NotFound, lambda w: results.replay(w.store, "abc", actor=OPERATOR)),
    "no-such-batch": Refusal(("resume", "nosuchbatch"), "nosuchbatch", NotFound,
                             lambda w: batches.find(w.store, "nosuchbatch", actor=OPERATOR)),
    "unknown-config-key": Refusal(("config", "set", "nope", "{}"), "nope", NotFound,
                                  lambda w: platform_config.validate_value("nope", {})),
    # -- Conflict: 409 ---------------------------------------------------------------------------
    "cap-reached": Refusal((*SUBMIT, "--account", "alice", "--label", "x"), "--account", Conflict,
                           lambda w: _submit(w, account="alice")),
    "publish-without-handle": Refusal((*SUBMIT, "--account", "bob", "--label", "x", "--publish"), "--publish",
                                      Conflict, lambda w: _submit(w, publish=True)),
    "handle-taken": Refusal(("account", "set-handle", "bob", "Alice"), "Alice", Conflict,
                            lambda w: accounts.set_handle(w.store, "bob", "Alice", actor=OPERATOR)),
    "handle-taken-on-create": Refusal(("account", "create", "carol", "--public-handle", "Alice"),
                                      "--public-handle Alice", Conflict,
                                      lambda w: accounts.create(w.store, "carol", "Alice", actor=OPERATOR)),
    "account-exists": Refusal(("account", "create", "alice"), "alice", Conflict,
                              lambda w: accounts.create(w.store, "alice", actor=OPERATOR)),
    "no-handle-to-revoke": Refusal(("account", "revoke-handle", "bob"), "bob", Conflict,
                                   lambda w: accounts.revoke_handle(w.store, "bob", actor=OPERATOR)),
    "not-published": Refusal(("unpublish", "{sub}"), "{sub}", Conflict,
                             lambda w: submissions.unpublish(w.store, w.submission, actor=OPERATOR)),
    "era-exists": Refusal(("era", "add", "e1", "--from", "2030-01-01", "--reason", "r"), "e1", Conflict,
                          lambda w: platform_config.add_era(w.store, "e1", "2030-01-01", "r", actor=OPERATOR)),
    "era-goes-back": Refusal(("era", "add", "e0", "--from", "2019-01-01", "--reason", "r"), "--from", Conflict,
                             lambda w: platform_config.add_era(w.store, "e0", "2019-01-01", "r", actor=OPERATOR)),
    "era-before-a-finalised-submission": Refusal(
        ("era", "add", "e0", "--from", "2025-06-01", "--reason", "r"), "--from", Conflict,
        lambda w: platform_config.add_era(w.store, "e0", "2025-06-01", "r", actor=OPERATOR)),
    "release-is-immutable": Refusal(("suite", "release", "{changed}"), "mini 1.0 is already released", Conflict,
                                    lambda w: releases.release_path(w.store, str(w.changed_suite), actor=OPERATOR)),
    "resume-with-another-agent": Refusal(("resume", "{batch}", "--agent", "reference:diligent"), "--agent",
                                         Conflict,
                                         lambda w: execution.stored_agent(w.store, w.batch, "reference:diligent")),
    # -- Forbidden: 403 --------------------------------------------------------------------------
    "baseline-not-owner": Refusal((*SUBMIT, "--account", "bob", "--label", "x", "--baseline"), "--baseline",
                                  Forbidden, lambda w: _submit(w, baseline=True)),
    # -- Invalid: 422 ----------------------------------------------------------------------------
    "blank-label": Refusal((*SUBMIT, "--account", "bob", "--label", "  "), "--label", Invalid,
                           lambda w: _submit(w, label="  ")),
    "long-play-model": Refusal((*SUBMIT, "--account", "bob", "--label", "x", "--play-model", LONG_MODEL),
                               "--play-model", Invalid, lambda w: _submit(w, play_model=LONG_MODEL)),
    "ray-address-without-ray": Refusal(("run", "forge", "--agent", "reference:idle", "--ray-address", "x:1"),
                                       "--ray-address", Invalid,
                                       lambda w: make_executor(None, 4, load_agent("reference:idle"),
                                                               ray_address="x:1")),
    "unknown-executor": Refusal(("run", "forge", "--agent", "reference:idle", "--executor", "nope"), "--executor",
                                Invalid, lambda w: make_executor("nope", 4, load_agent("reference:idle"))),
    "unlisted-platform-entry": Refusal((*SUBMIT, "--account", "bob", "--label", "x", "--unlisted"), "--unlisted",
                                       Invalid, lambda w: _submit(w, unlisted=True)),
    "bad-account-name": Refusal(("account", "create", "A_B"), "A_B", Invalid,
                                lambda w: accounts.create(w.store, "A_B", actor=OPERATOR)),
    "bad-handle": Refusal(("account", "set-handle", "bob", "x!"), "x!", Invalid,
                          lambda w: accounts.set_handle(w.store, "bob", "x!", actor=OPERATOR)),
    "config-not-json": Refusal(("config", "set", "submission_cap", "{nope"), "submission_cap", Invalid,
                               lambda w: platform_config.parse_json_value("{nope", "submission_cap")),
    "config-out-of-range": Refusal(("config", "set", "submission_cap", '{"max_per_account_per_version": 0}'),
                                   "submission_cap", Invalid,
                                   lambda w: platform_config.set_value(
                                       w.store, "submission_cap", {"max_per_account_per_version": 0}, actor=OPERATOR)),
    "era-from-not-a-date": Refusal(("era", "add", "e2", "--from", "soon", "--reason", "r"), "--from", Invalid,
                                   lambda w: platform_config.add_era(w.store, "e2", "soon", "r", actor=OPERATOR)),
    "era-without-reason": Refusal(("era", "add", "e2", "--from", "2030-01-01", "--reason", " "), "--reason",
                                  Invalid, lambda w: platform_config.add_era(w.store, "e2", "2030-01-01", " ", actor=OPERATOR)),
    "long-note": Refusal(("note", "{sub}", LONG_NOTE), "variance note is at most 2000", Invalid,
                         lambda w: submissions.note(w.store, w.submission, LONG_NOTE, actor=OPERATOR)),
}


def _fill(text: str, w: World) -> str:
    return text.replace("{sub}", w.submission).replace("{batch}", w.batch).replace("{changed}", str(w.changed_suite))


def _digest(path: Path) -> str:
    """Every stored row, in a stable order (`iterdump` orders by table; rows by rowid)."""
    with sqlite3.connect(path) as conn:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[..., tuple[int, str, str]]]:
    """The console script's `main`, in this process: (exit code, stdout, stderr)."""
    from assay.cli import main

    before = signal.getsignal(signal.SIGTERM)

    def call(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["assay", *args])
        with pytest.raises(SystemExit) as caught:
            main()
        done = capsys.readouterr()
        return caught.value.code if isinstance(caught.value.code, int) else 1, done.out, done.err

    yield call
    signal.signal(signal.SIGTERM, before)


def test_the_catalogue_covers_every_kind() -> None:
    assert len(CATALOGUE) >= 15
    assert {r.kind for r in CATALOGUE.values()} == set(STATUS)


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_a_refusal_is_one_cli_line_naming_its_flag_and_a_domain_error_with_its_status(
    name: str, world: World, cli: Callable[..., tuple[int, str, str]]
) -> None:
    refusal = CATALOGUE[name]
    before = _digest(world.path)

    code, out, err = cli(*(_fill(a, world) for a in refusal.args), "--db", world.url)

    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and lines[0].startswith("assay: error: "), err
    assert "Traceback" not in err
    assert _fill(refusal.names, world) in lines[0], lines[0]
    assert _digest(world.path) == before, "a refusal changed what is stored"

    with pytest.raises(DomainError) as caught:
        refusal.service(world)
    exc = caught.value
    assert type(exc) is refusal.kind, repr(exc)
    assert http_status(exc) == exc.http_status == STATUS[refusal.kind]
    assert "--" not in exc.message and "--" not in str(exc), exc.message
    assert exc.message in lines[0]
    assert _digest(world.path) == before, "a refusal changed what is stored"


def test_the_flag_is_named_only_by_the_cli() -> None:
    from assay.cli.errors import FLAGS, cli_line

    exc = NotFound("no such account", "account", value="ghost")
    assert str(exc) == "ghost: no such account"
    assert cli_line(exc) == "--account ghost: no such account"
    assert cli_line(exc, {"--db", "--json"}) == "ghost: no such account"  # `assay account show NAME`
    assert cli_line(Invalid("must be at least 1", "trials")) == "--trials: must be at least 1"
    assert cli_line(Conflict("refused by the database")) == "refused by the database"
    assert cli_line(BadInput("not YAML", "a.yaml")) == "a.yaml: not YAML"
    assert all(flag.startswith("--") and field.isidentifier() for field, flag in FLAGS.items())


def test_other_bad_input_is_unprocessable_and_anything_else_a_server_error() -> None:
    assert http_status(BadInput("not YAML", "a.yaml")) == 422
    assert http_status(ValueError("a bug")) == 500
    assert [http_status(k("m")) for k in (NotFound, Conflict, Forbidden, Invalid)] == [404, 409, 403, 422]


def test_a_domain_error_crosses_a_process_boundary_whole() -> None:
    import pickle

    back = pickle.loads(pickle.dumps(Forbidden("only the suite owner may", "baseline", value="bob")))
    assert (type(back), back.message, back.field, back.value, str(back)) == (
        Forbidden, "only the suite owner may", "baseline", "bob", "bob: only the suite owner may")
