"""Scenario authoring that helps: every problem at once, check paths held to the world, one language.

- `assay validate` reports every problem of every document it reads, one line each on stderr, then
  exits 2; scenarios that are valid still get their `ok  ID  HASH` line on stdout.
- Every check and win-condition path is held against the kit's state model and the initial state
  it materialises (`scenario.shape`; its own rules are in tests/scenario/test_shape.py): a field the
  model lacks, or a data key the initial state lacks, is refused naming the nearest one, at validate
  time and when a run loads it.
- Language tags are canonical BCP-47 before hashing (`EN` is `en`, `en-gb` is `en-GB`), so two
  spellings of one language are one content hash; `en_GB` is refused with the tag that was meant.
"""

from __future__ import annotations

import copy
import pickle
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import assay
from assay.cli import app
from assay.errors import BadInput, Problems
from assay.scenario.load import describe_errors, load_scenario, parse_scenario
from assay.worlds.kits import get_kit
from assay.scenario.models import Scenario, bcp47
from assay.scenario.shape import Shape, state_schema
from assay.scenario.suite import Suite
from assay.scenario.yamlsafe import load_yaml_file
from assay.service.suites import examine_suite, resolve_suite
from tests.support.forkserver import assay_command
from tests.support.strategies import examples

FORGE = Path(assay.__file__).resolve().parent / "suites" / "forge"
CASES = sorted(p.stem for p in FORGE.glob("*.yaml") if p.stem != "suite")
REPO = Path(__file__).resolve().parents[2]
BASE: dict[str, Any] = load_yaml_file(FORGE / "backup-running.yaml")
TYPO = "checks[0].expect.path: no backup 'nightlyy' in backups (nearest: 'nightly')"


def doc(**changes: Any) -> dict[str, Any]:
    """backup-running.yaml, with top-level fields replaced and `checks.N` / `wins.N` expects."""
    d = copy.deepcopy(BASE)
    for key, value in changes.items():
        if key.startswith(("checks_", "wins_")):
            section, i = key.split("_")
            d["checks" if section == "checks" else "win_conditions"][int(i)]["expect"] = value
        else:
            d[key] = value
    return d


def problems_of(document: dict[str, Any], where: str = "case.yaml") -> list[str]:
    with pytest.raises(BadInput) as caught:
        parse_scenario(document, where, get_kit)
    exc = caught.value
    lines = [str(p) for p in exc.problems] if isinstance(exc, Problems) else [str(exc)]
    assert all(line.startswith(f"{where}: ") for line in lines), lines
    return [line[len(where) + 2:] for line in lines]


def write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


# ---- check paths against the materialised initial state -------------------------------------


def test_a_typo_in_a_check_path_is_refused_naming_the_nearest_key() -> None:
    assert problems_of(doc(checks_0={"path": "backups.nightlyy.status", "equals": "running"})) == [TYPO]


def test_the_refusal_happens_for_a_run_too(tmp_path: Path) -> None:
    path = write(tmp_path / "case.yaml", doc(checks_0={"path": "backups.nightlyy.status", "equals": "running"}))
    with pytest.raises(BadInput, match="no backup 'nightlyy'"):
        resolve_suite(str(path))
    with pytest.raises(BadInput, match="no backup 'nightlyy'"):
        load_scenario(path, get_kit)


@pytest.mark.parametrize(
    ("expect", "problem"),
    [
        pytest.param({"not": {"path": "backups.nightlyy.status", "equals": "failed"}},
                     TYPO.replace(".path", ".not.path"), id="under-not"),
        pytest.param({"any": [{"path": "backups.nightly.status", "equals": "running"},
                              {"path": "backups.nightlyy.status", "equals": "running"}]},
                     TYPO.replace(".path", ".any[1].path"), id="inside-any"),
        pytest.param({"count": "tickets.T-5210.replies", "at_least": 1},
                     "checks[0].expect.count: no ticket 'T-5210' in tickets (nearest: 'T-5120')", id="count-path"),
        pytest.param({"path": "hosts.store-01.isolated.since", "exists": True},
                     "checks[0].expect.path: hosts.store-01.isolated is a boolean: there is nothing below it",
                     id="below-a-scalar"),
        pytest.param({"path": "hosts.store-01.disks./var.files./var/log/archive/app-2026-09.log.gz", "exists": False},
                     "checks[0].expect.path: no file '/var/log/archive/app-2026-09' in hosts.store-01.disks./var.files "
                     "(nearest: '/var/log/archive/app-2026-09.log.gz': a dot inside a key is written '\\.', as in "
                     "'hosts.store-01.disks./var.files./var/log/archive/app-2026-09\\.log\\.gz')",
                     id="a-dot-in-a-key-splits-it"),  # was silently true on every run
        pytest.param({"path": "hosts.store-01.disks./var.size_gb.x", "exists": False},
                     "checks[0].expect.path: hosts.store-01.disks./var.size_gb is an integer ≥ 1: there is nothing below it",
                     id="below-a-number"),
        pytest.param({"path": "backups.zzz.status", "equals": "running"},
                     "checks[0].expect.path: no backup 'zzz' in backups (it has 'nightly')", id="nothing-close"),
        pytest.param({"count": "changess", "at_most": 0},
                     "checks[0].expect.count: no field 'changess' in the estate state (nearest: 'changes')",
                     id="top-level-key"),
        pytest.param({"path": "backups.nightly.finished_at", "exists": True},
                     "checks[0].expect.path: no field 'finished_at' in backups.nightly (it has", id="a-field-no-model-has"),
        pytest.param({"path": "hosts.store-01.disks./var.files./var/tmp/newfile", "exists": False},
                     "checks[0].expect.path: no file '/var/tmp/newfile' in hosts.store-01.disks./var.files",
                     id="a-file-no-action-creates"),  # always true: no tool creates a file
    ],
)
def test_every_kind_of_predicate_has_its_paths_checked(expect: dict[str, Any], problem: str) -> None:
    found = problems_of(doc(checks_0=expect))
    assert len(found) == 1 and found[0].startswith(problem), found


@pytest.mark.parametrize(
    "expect",
    [
        pytest.param({"path": r"hosts.store-01.disks./var.files./var/log/archive/app-2026-09\.log\.gz", "exists": False},
                     id="a-file-an-action-removes"),
        pytest.param({"not": {"path": "hosts.store-01.replica_of", "equals": None}}, id="a-nullable-field"),
        pytest.param({"count": "notifications", "at_least": 1}, id="an-empty-list"),
    ],
)
def test_what_a_run_can_change_may_be_named(expect: dict[str, Any]) -> None:
    assert parse_scenario(doc(checks_0=expect), "case.yaml", get_kit).id == "forge-backup-running"


@pytest.mark.parametrize("case", CASES)
def test_no_built_in_check_path_is_refused(case: str) -> None:
    loaded = load_scenario(FORGE / f"{case}.yaml", get_kit)
    items = [*loaded.scenario.checks, *loaded.scenario.win_conditions]
    shape = Shape(state_schema(get_kit("estate").state_model), loaded.initial_state, "the estate state")
    assert items and all(shape.problems(c.expect, c.id) == [] for c in items)
    assert {s.id for s in resolve_suite("forge").scenarios} >= {loaded.id}


# ---- every problem, not only the first ------------------------------------------------------


def test_a_document_reports_every_problem_in_order() -> None:
    document = doc(
        title="", language="en_GB",
        checks_0={"path": "backups.nightlyy.status", "equals": "running"},
        checks_1={"all": [{"path": "hosts.store-01.diskz./var.used_pct", "at_most": 85},
                          {"path": "hosts.store-01.diskz./var.used_gb", "at_most": 850}]},
        wins_0={"path": "backupz.nightly.status", "equals": "running"},
    )
    assert problems_of(document) == [
        "title: must not be empty",
        "language: 'en_GB' is not a BCP-47 language tag; did you mean 'en-GB'?",
        TYPO,
        "checks[1].expect.all[0].path: no field 'diskz' in hosts.store-01 (nearest: 'disks')",
        "checks[1].expect.all[1].path: no field 'diskz' in hosts.store-01 (nearest: 'disks')",
        "win_conditions[0].expect.path: no field 'backupz' in the estate state (nearest: 'backups')",
    ]


def test_the_single_line_is_the_first_problem_and_how_many_more() -> None:
    with pytest.raises(Problems) as caught:
        parse_scenario(doc(title="", checks_0={"path": "backups.nightlyy.status", "equals": "running"}), "case.yaml", get_kit)
    assert str(caught.value) == "case.yaml: title: must not be empty (and 1 more)"
    assert caught.value.where == "case.yaml" and isinstance(caught.value, BadInput)
    again = pickle.loads(pickle.dumps(caught.value))
    assert [str(p) for p in again.problems] == [str(p) for p in caught.value.problems]


def test_world_problems_and_field_problems_come_out_together() -> None:
    world = copy.deepcopy(BASE["world"])
    world["alerts"][0]["host"] = "store-99"
    assert problems_of(doc(title="", world=world)) == [
        "title: must not be empty",
        "world.alerts[0].host: unknown host 'store-99' (nearest: 'store-01')",
    ]


def test_an_invalid_world_does_not_hide_a_typo_d_check_field() -> None:
    world = copy.deepcopy(BASE["world"])
    world["alerts"][0]["host"] = "store-99"
    assert problems_of(doc(world=world, checks_0={"path": "backups.nightly.statuss", "equals": "running"},
                           checks_1={"count": "notifications", "where": {"teem": "ops"}, "at_most": 0})) == [
        "world.alerts[0].host: unknown host 'store-99' (nearest: 'store-01')",
        "checks[0].expect.path: no field 'statuss' in backups.nightly (nearest: 'status')",
        "checks[1].expect.where.teem: no field 'teem' in the items of notifications (nearest: 'team')",
    ]


def test_without_a_world_data_keys_are_not_judged_but_field_names_are() -> None:
    world = copy.deepcopy(BASE["world"])
    world["alerts"][0]["host"] = "store-99"
    # 'nightlyy' is a data key: only a sound world can say it is absent, so it is not refused here
    assert problems_of(doc(world=world, checks_0={"path": "backups.nightlyy.status", "equals": "running"})) == [
        "world.alerts[0].host: unknown host 'store-99' (nearest: 'store-01')",
    ]


def test_an_unknown_kit_near_a_known_one_still_has_its_checks_held_to_that_kit() -> None:
    assert problems_of(doc(kit="estat", checks_0={"path": "backups.nightly.statuss", "equals": "running"})) == [
        "kit: unknown kit 'estat' (nearest: 'estate'); the rest was checked against kit 'estate'",
        "checks[0].expect.path: no field 'statuss' in backups.nightly (nearest: 'status')",
    ]
    far = problems_of(doc(kit="spaceship", checks_0={"path": "backups.nightly.statuss", "equals": "running"}))
    assert far == ["kit: unknown kit 'spaceship' (known: campaign, estate)"]


@pytest.mark.parametrize(
    ("expect", "problem"),
    [
        ({"path": "hosts.store-01.disks./var.used_pct", "contains": "9"},
         "checks[0].expect.contains: hosts.store-01.disks./var.used_pct is an integer 0..100: contains and matches "
         "test strings"),
        ({"path": "backups.nightly.status", "matches": "^run$"},
         "checks[0].expect.matches: no value of backups.nightly.status can pass it: backups.nightly.status is one of "
         "'running', 'completed', 'failed'"),
        ({"count": "notifications", "where": {"t": {"contains": "x"}}, "at_most": 0},
         "checks[0].expect.where.t: no t of an item of notifications can pass this text test: it is an integer"),
        ({"count": "notifications", "where": {"message": {"contains": "x", "cse": "insensitive"}}, "at_most": 0},
         "checks[0].expect.where.message.cse: unknown field (did you mean 'case'?)"),
        ({"count": "notifications", "where": {"message": {"matches": "(x*)*"}}, "at_most": 0},
         "checks[0].expect.where.message.matches: a repetition inside a repetition (like '(a+)+') can take "
         "exponential time: write it flat"),
    ],
)
def test_text_tests_are_held_to_the_field_they_read(expect: dict[str, Any], problem: str) -> None:
    assert problems_of(doc(checks_0=expect)) == [problem]


@pytest.mark.parametrize(
    "expect",
    [
        {"path": "backups.nightly.status", "contains": "runn"},
        {"path": "tickets.T-5120.body", "contains": "backup", "case": "insensitive"},
        {"count": "tickets.T-5120.replies", "where": {"message": {"contains": "nightly"}}, "at_least": 1},
        {"count": "notifications", "where": {"message": {"matches": "nightly|backup"}, "team": "ops"}, "at_most": 0},
    ],
)
def test_text_tests_a_string_field_can_pass_are_accepted(expect: dict[str, Any]) -> None:
    parse_scenario(doc(checks_0=expect), "case.yaml", get_kit)


def test_check_paths_are_checked_even_when_another_check_is_malformed() -> None:
    document = doc(checks_1={"path": "backups.nightlyy.status", "equals": "running"})
    document["checks"][0]["weight"] = "25"
    found = problems_of(document)
    assert found[0] == "checks[0].weight: must be an integer, not the string '25'"
    assert found[1:] == [TYPO.replace("checks[0]", "checks[1]")]


def test_a_typo_d_field_name_is_one_problem_naming_the_field_meant() -> None:
    document = doc()
    document["breifing"] = document.pop("briefing")
    assert problems_of(document) == ["breifing: unknown field (did you mean 'briefing'?)"]
    document = doc()
    document["colour"] = "red"
    assert problems_of(document) == ["colour: unknown field (allowed: briefing, checks, frozen_on, hidden_truth, id, "
                                     "kit, language, seed, title, win_conditions, world)"]
    document = doc()
    document["checks"][0]["safty"] = True
    assert problems_of(document) == ["checks[0].safty: unknown field (did you mean 'safety'?)"]
    with pytest.raises(Exception) as caught:
        Scenario.model_validate({**doc(), "secret": 1, "hidden_truth": None})
    assert describe_errors(caught.value) == ["secret: unknown field", "hidden_truth: must be a string, not null"]


def test_a_suite_reports_the_problems_of_every_file(tmp_path: Path) -> None:
    for name in ("all-quiet.yaml", "wrong-fix.yaml"):
        (tmp_path / name).write_text((FORGE / name).read_text(encoding="utf-8"), encoding="utf-8")
    write(tmp_path / "typo.yaml", doc(checks_0={"path": "backups.nightlyy.status", "equals": "running"}))
    write(tmp_path / "suite.yaml", {
        "key": "mini", "version": "1.0", "title": "Mini", "language": "EN_gb", "reps_per_scenario": 0,
        "scenarios": ["all-quiet.yaml", "typo.yaml", "gone.yaml", "wrong-fix.yaml", "all-quiet.yaml"],
    })
    found = examine_suite(str(tmp_path))
    suite, typo = tmp_path / "suite.yaml", tmp_path / "typo.yaml"
    assert [str(p) for p in found.problems] == [
        f"{suite}: language: 'EN_gb' is not a BCP-47 language tag; did you mean 'en-GB'?",
        f"{suite}: reps_per_scenario: must be greater than or equal to 1 (got 0)",
        f"{typo}: {TYPO}",
        f"{suite}: scenario file 'gone.yaml' not found next to the suite",
        f"{suite}: scenario file 'all-quiet.yaml' is listed twice (first as 'all-quiet.yaml')",
    ]
    assert [s.id for s in found.scenarios] == ["forge-all-quiet", "forge-wrong-fix"]
    assert found.bundle is None
    with pytest.raises(Problems) as caught:
        resolve_suite(str(tmp_path))
    assert str(caught.value).endswith("(and 4 more)")


def test_a_directory_reports_every_file(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", doc(checks_0={"path": "backups.nightlyy.status", "equals": "running"}))
    write(tmp_path / "b.yaml", doc(id="forge-other", language="en_GB"))
    (tmp_path / "c.yaml").write_text((FORGE / "all-quiet.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    found = examine_suite(str(tmp_path))
    assert [str(p) for p in found.problems] == [
        f"{tmp_path / 'a.yaml'}: {TYPO}",
        f"{tmp_path / 'b.yaml'}: language: 'en_GB' is not a BCP-47 language tag; did you mean 'en-GB'?",
    ]
    assert [s.id for s in found.scenarios] == ["forge-all-quiet"]


# ---- language tags: canonical before hashing ------------------------------------------------


@pytest.mark.parametrize(("given_tag", "canonical"), [
    ("en", "en"), ("EN", "en"), ("en-gb", "en-GB"), ("EN-GB", "en-GB"), ("en-GB", "en-GB"),
    ("zh-hant-tw", "zh-Hant-TW"), ("no", "no"), ("es-419", "es-419"),
])
def test_language_tags_are_canonical(given_tag: str, canonical: str) -> None:
    assert bcp47(given_tag) == canonical
    loaded = parse_scenario(doc(language=given_tag), "case.yaml", get_kit)
    assert loaded.scenario.language == loaded.document["language"] == canonical
    assert Suite.model_validate({"key": "mini", "version": "1", "title": "t", "language": given_tag,
                                 "scenarios": ["a.yaml"]}).language == canonical


def test_spellings_of_one_language_are_one_hash_and_built_in_hashes_do_not_move() -> None:
    original = load_scenario(FORGE / "backup-running.yaml", get_kit)
    assert original.scenario.language == "en"
    assert {parse_scenario(doc(language=t), "case.yaml", get_kit).content_hash for t in ("en", "EN", "En")} == {original.content_hash}
    british = {parse_scenario(doc(language=t), "case.yaml", get_kit).content_hash for t in ("en-gb", "EN-GB", "en-GB")}
    assert len(british) == 1 and british != {original.content_hash}


@pytest.mark.parametrize(("tag", "message"), [
    ("en_GB", "'en_GB' is not a BCP-47 language tag; did you mean 'en-GB'?"),
    ("zh_hant_TW", "'zh_hant_TW' is not a BCP-47 language tag; did you mean 'zh-Hant-TW'?"),
    ("e_", "'e_' is not a BCP-47 language tag"),
    ("xx-!!", "'xx-!!' is not a valid BCP-47 language tag"),
])
def test_a_non_bcp47_tag_is_refused_with_the_tag_meant(tag: str, message: str) -> None:
    assert problems_of(doc(language=tag)) == [f"language: {message}"]


LANGUAGES = ["en", "de", "fr", "zh", "sr", "no", "nb", "pt", "es", "ja", "ar", "yue", "iw", "eng", "deu", "sh", "und"]
SCRIPTS = ["Latn", "Cyrl", "Hans", "Hant", "Arab"]
REGIONS = ["GB", "US", "CN", "TW", "DE", "BR", "RS", "419", "001"]
VARIANTS = ["1901", "1996", "valencia", "pinyin"]
CASINGS = [str.lower, str.upper, str.title, str.swapcase, lambda s: s]


@st.composite
def tags(draw: st.DrawFn) -> str:
    """Tags put together from valid subtags, each subtag in any casing."""
    parts = [draw(st.sampled_from(LANGUAGES))]
    for pool in (SCRIPTS, REGIONS, VARIANTS):
        if draw(st.booleans()):
            parts.append(draw(st.sampled_from(pool)))
    return "-".join(draw(st.sampled_from(CASINGS))(p) for p in parts)


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@settings(max_examples=examples(300), deadline=None)
@given(tags())
def test_canonicalisation_is_idempotent_and_case_insensitive(tag: str) -> None:
    canonical = bcp47(tag)
    assert bcp47(canonical) == canonical
    assert bcp47(tag.lower()) == bcp47(tag.upper()) == bcp47(tag.swapcase()) == canonical
    if "-" in tag:  # the POSIX-locale spelling of the same tag is refused, suggesting the canonical one
        with pytest.raises(ValueError, match=f"; did you mean '{canonical}'\\?$"):
            bcp47(tag.replace("-", "_"))


def test_the_codes_answered_without_langcodes_are_exactly_its_canonical_two_letter_tags() -> None:
    """`bcp47` answers `en` from a table, without importing langcodes: the table must hold every
    two-letter tag that langcodes keeps as written, and nothing it would change or refuse."""
    import string

    import langcodes

    from assay.languages import _CANONICAL_AS_WRITTEN, _standard

    pairs = [a + b for a in string.ascii_lowercase for b in string.ascii_lowercase]
    assert _CANONICAL_AS_WRITTEN == {t for t in pairs if _standard(t) == t}
    assert {"en", "pl"} <= _CANONICAL_AS_WRITTEN and not {"iw", "in", "sh", "xx"} & _CANONICAL_AS_WRITTEN
    assert all(langcodes.tag_is_valid(t) for t in _CANONICAL_AS_WRITTEN)


# ---- the real CLI ---------------------------------------------------------------------------


def test_cli_validate_prints_every_problem_one_line_each(tmp_path: Path) -> None:
    path = write(tmp_path / "case.yaml", doc(
        title="", checks_0={"path": "backups.nightlyy.status", "equals": "running"}))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"assay: error: {path}: title: must not be empty",
        f"assay: error: {path}: {TYPO}",
    ]


def test_cli_validate_of_a_valid_suite_prints_ok_lines_as_before() -> None:
    result = CliRunner().invoke(app, ["validate", str(FORGE / "suite.yaml")])
    assert result.exit_code == 0, result.output
    expected = [f"ok  {s.id}  {s.content_hash}" for s in resolve_suite("forge").scenarios]
    assert result.stdout.splitlines() == expected and result.stderr == ""


@pytest.mark.heavy  # starts a process
def test_cli_validate_of_a_directory_says_ok_and_every_problem(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", doc(checks_0={"path": "backups.nightlyy.status", "equals": "running"}))
    write(tmp_path / "b.yaml", doc(id="forge-other", language="en_GB"))
    (tmp_path / "c.yaml").write_text((FORGE / "all-quiet.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    result = subprocess.run([*assay_command(), "validate", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result
    assert result.stdout.splitlines() == [f"ok  forge-all-quiet  {load_scenario(tmp_path / 'c.yaml', get_kit).content_hash}"]
    assert result.stderr.splitlines() == [
        f"assay: error: {tmp_path / 'a.yaml'}: {TYPO}",
        f"assay: error: {tmp_path / 'b.yaml'}: language: 'en_GB' is not a BCP-47 language tag; did you mean 'en-GB'?",
    ]


@pytest.mark.heavy  # starts a process
def test_cli_run_of_a_scenario_with_a_bad_path_refuses_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path / "case.yaml", doc(
        language="en_GB", checks_0={"path": "backups.nightlyy.status", "equals": "running"}))
    db = tmp_path / "assay.db"
    result = subprocess.run([*assay_command(), "run", str(path), "--agent", "reference:idle", "--trials", "1",
                             "--db", f"sqlite:///{db}"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"assay: error: {path}: language: 'en_GB' is not a BCP-47 language tag; did you mean 'en-GB'? (and 1 more)"]
    assert not db.exists(), "a refused run must not open the store"
