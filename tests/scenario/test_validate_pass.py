"""`assay validate` in one pass: every problem of a document at once, each one line naming its path.

- A document holding many independent mistakes (fields, check ids, weights, a check path, the
  world's types, duplicate ids, unknown references) reports all of them in one run of the real CLI.
- Duplicate ids are refused: two scenarios of one `id` in a directory or suite (one line naming both
  files), and two things of one id inside a world (tickets, hosts, services, … ; npcs, beats, …),
  located at the second and naming the first.
- The words are ours, not pydantic's, and an unknown field lists the fields allowed there.
- `--explain` shows each check's and win condition's verdict on the untouched world.
"""

from __future__ import annotations

import copy
import json
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
from assay.scenario.load import PATTERN_WORDS, describe_errors, parse_scenario
from assay.scenario.models import Scenario
from assay.scenario.rubric import Rubric
from assay.scenario.suite import Suite
from assay.scenario.yamlsafe import load_yaml_file
from assay.service.suites import examine_suite, resolve_suite
from assay.worlds.campaign.spec import CampaignSpec
from assay.worlds.estate.spec import EstateSpec
from assay.worlds.kits import get_kit

SUITES = Path(assay.__file__).resolve().parent / "suites"
FORGE = SUITES / "forge"
BASE: dict[str, Any] = load_yaml_file(FORGE / "backup-running.yaml")
CAMPAIGN: dict[str, Any] = load_yaml_file(SUITES / "academy" / "border-well.yaml")
PYDANTIC = ("Input should", "String should", "List should", "Dictionary should", "Value should",
            "after validation", "Extra inputs", "Field required")


def write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def problems_of(document: dict[str, Any]) -> list[str]:
    with pytest.raises(BadInput) as caught:
        parse_scenario(document, "case.yaml", get_kit)
    exc = caught.value
    lines = [str(p) for p in exc.problems] if isinstance(exc, Problems) else [str(exc)]
    assert all(line.startswith("case.yaml: ") and "\n" not in line for line in lines), lines
    return [line.removeprefix("case.yaml: ") for line in lines]


def validate(*args: str) -> Any:
    return CliRunner().invoke(app, ["validate", *args], env={"ASSAY_DB": "sqlite:////nonexistent/assay.db"})


# ---- one document, many mistakes, one run ----------------------------------------------------


def many_mistakes() -> tuple[dict[str, Any], list[str]]:
    """backup-running.yaml with a dozen independent mistakes, and the line each must give."""
    d = copy.deepcopy(BASE)
    d["colour"] = "red"
    d["title"] = ""
    d["seed"] = -7
    d["checks"][0]["weight"] = "25"
    d["checks"][1]["id"] = "Var_Below"
    d["checks"][2]["expect"] = {"count": "tickets.T-5210.replies", "at_least": 1}
    d["win_conditions"][0]["safty"] = True
    w = d["world"]
    w["hosts"][1]["status"] = "sideways"
    w["hosts"][0]["services"].append({"name": "minio"})
    w["tickets"].append({**copy.deepcopy(w["tickets"][0]), "tenant": "acmee"})
    w["alerts"][0]["host"] = "store-1"
    w["runbooks"].append(copy.deepcopy(w["runbooks"][0]))
    return d, [
        "win_conditions[0].safty: unknown field (allowed: description, expect, id)",
        ("colour: unknown field (allowed: briefing, checks, frozen_on, hidden_truth, id, kit, language, seed, title, "
        "win_conditions, world)"),
        "title: must not be empty",
        "seed: must be greater than or equal to 0 (got -7)",
        "checks[0].weight: must be an integer, not the string '25'",
        ("checks[1].id: 'Var_Below' is not allowed here; use 3 to 64 lowercase letters, digits and '-', not starting "
        "or ending with '-'"),
        "world.hosts[0].services[2].name: duplicate service name 'minio' (first at services[0])",
        "world.hosts[1].status: must be 'up' or 'down', not the string 'sideways'",
        "world.tickets[1].id: duplicate ticket id 'T-5120' (first at tickets[0])",
        "world.runbooks[1].id: duplicate runbook id 'disk-pressure' (first at runbooks[0])",
        "world.alerts[0].host: unknown host 'store-1' (nearest: 'store-01')",
        "world.tickets[1].tenant: unknown tenant 'acmee' (nearest: 'acme')",
    ]


def test_a_document_with_many_independent_mistakes_reports_them_all_in_one_run(tmp_path: Path) -> None:
    document, expected = many_mistakes()
    path = write(tmp_path / "case.yaml", document)
    result = validate(str(path))
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [f"assay: error: {path}: {line}" for line in expected]


def test_once_the_world_is_sound_the_check_paths_come_out_beside_every_other_field() -> None:
    """An invalid seed (or any other field) no longer hides a check path that resolves to nothing."""
    document, _ = many_mistakes()
    document["world"] = copy.deepcopy(BASE["world"])
    found = problems_of(document)
    assert "seed: must be greater than or equal to 0 (got -7)" in found
    assert found[-1] == "checks[2].expect.count: no ticket 'T-5210' in tickets (nearest: 'T-5120')", found


def test_check_ids_and_the_weight_sum_are_both_reported() -> None:
    d = copy.deepcopy(BASE)
    d["checks"][1]["id"] = d["checks"][0]["id"]
    d["checks"][2]["weight"] = 30
    assert problems_of(d) == ["checks[1].id: duplicate check id 'backup-still-running' (first at checks[0])",
                              "checks: check weights sum to 105, not 100"]


# ---- duplicate ids: scenarios in a directory or suite ---------------------------------------


def test_two_scenarios_of_one_id_in_a_directory_are_refused_naming_both_files(tmp_path: Path) -> None:
    first = write(tmp_path / "a.yaml", BASE)
    second = write(tmp_path / "b.yaml", {**copy.deepcopy(BASE), "title": "Another take"})
    found = examine_suite(str(tmp_path))
    assert [str(p) for p in found.problems] == [
        f"{second}: scenario id 'forge-backup-running' is already the id of {first}; each case needs its own id"]
    assert [s.id for s in found.scenarios] == ["forge-backup-running"] and found.bundle is None
    with pytest.raises(BadInput, match="is already the id of"):
        resolve_suite(str(tmp_path))


def test_two_scenarios_of_one_id_in_a_suite_are_refused_naming_both_files(tmp_path: Path) -> None:
    first = write(tmp_path / "one.yaml", BASE)
    second = write(tmp_path / "two.yaml", {**copy.deepcopy(BASE), "title": "Another take"})
    write(tmp_path / "suite.yaml", {"key": "mini", "version": "1", "title": "Mini", "language": "en",
                                    "scenarios": ["one.yaml", "two.yaml", "./one.yaml"]})
    result = validate(str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"assay: error: {tmp_path / 'suite.yaml'}: scenario file './one.yaml' is listed twice (first as 'one.yaml')",
        (f"assay: error: {second}: scenario id 'forge-backup-running' is already the id of {first}; each case needs "
        "its own id"),
    ]


# ---- duplicate ids inside a world ------------------------------------------------------------


def _twice(path: tuple[Any, ...], change: dict[str, Any] | None = None) -> Any:
    """Append a copy of the item at `path` (its list and index), changed by `change`."""
    def edit(world: dict[str, Any]) -> None:
        node: Any = world
        for key in path[:-1]:
            node = node[key]
        node.append({**copy.deepcopy(node[path[-1]]), **(change or {})})
    return edit


@pytest.mark.parametrize(("edit", "line"), [
    pytest.param(_twice(("hosts", 1), {"services": []}), "world.hosts[2].name: duplicate host name 'web-01' "
                 "(first at hosts[1])", id="host"),
    pytest.param(_twice(("hosts", 0, "services", 1)), "world.hosts[0].services[2].name: duplicate service name "
                 "'backup-agent' (first at services[1])", id="service"),
    pytest.param(_twice(("hosts", 0, "disks", 0), {"files": []}), "world.hosts[0].disks[1].mount: duplicate disk "
                 "mount '/var' (first at disks[0])", id="disk"),
    pytest.param(_twice(("hosts", 0, "disks", 0, "files", 3)), "world.hosts[0].disks[0].files[4].path: duplicate "
                 "file path '/var/tmp/minio-upload-cache' (first at files[3])", id="file"),
    pytest.param(_twice(("alerts", 0)), "world.alerts[1].id: duplicate alert id 'A-8810' (first at alerts[0])",
                 id="alert"),
    pytest.param(_twice(("tickets", 0)), "world.tickets[1].id: duplicate ticket id 'T-5120' (first at tickets[0])",
                 id="ticket"),
    pytest.param(_twice(("runbooks", 0)), "world.runbooks[1].id: duplicate runbook id 'disk-pressure' "
                 "(first at runbooks[0])", id="runbook"),
    pytest.param(_twice(("backups", 0)), "world.backups[1].id: duplicate backup id 'nightly' (first at backups[0])",
                 id="backup"),
    pytest.param(lambda w: w.update(metrics=[{"host": "web-01", "metric": "rps", "base": 5, "spread": 1}] * 2),
                 "world.metrics[1].metric: duplicate metric 'web-01.rps' (first at metrics[0])", id="metric"),
    pytest.param(lambda w: w.update(customers={"acme": [{"id": "c-1", "name": "A", "email": "a@x", "plan": "p"},
                                                        {"id": "c-1", "name": "B", "email": "b@x", "plan": "p"}]}),
                 "world.customers.acme[1].id: duplicate customer id 'c-1' (first at customers.acme[0])", id="customer"),
    pytest.param(lambda w: w.update(teams=["ops", "storage", "ops"]), "world.teams[2]: duplicate team 'ops' "
                 "(first at teams[0])", id="team"),
])
def test_an_estate_refuses_a_repeated_id_at_its_second_use(edit: Any, line: str) -> None:
    d = copy.deepcopy(BASE)
    edit(d["world"])
    assert problems_of(d) == [line]


@pytest.mark.parametrize(("edit", "line"), [
    pytest.param(_twice(("npcs", 0)), "world.npcs[2].id: duplicate npc id 'harrow' (first at npcs[0])", id="npc"),
    pytest.param(_twice(("rules", 1)), "world.rules[2].id: duplicate rule id 'lines' (first at rules[1])", id="rule"),
    pytest.param(_twice(("objectives", 0)), "world.objectives[3].id: duplicate objective id 'find-the-pass' "
                 "(first at objectives[0])", id="objective"),
    pytest.param(_twice(("script", 0)), "world.script[5].id: duplicate beat id 'ridge' (first at script[0])",
                 id="beat"),
    pytest.param(lambda w: w["character"].update(secrets=[{"id": "s", "about": "a", "text": "t"}] * 2),
                 "world.character.secrets[1].id: duplicate secret id 's' (first at secrets[0])", id="secret"),
])
def test_a_campaign_refuses_a_repeated_id_at_its_second_use(edit: Any, line: str) -> None:
    d = copy.deepcopy(CAMPAIGN)
    edit(d["world"])
    assert problems_of(d) == [line]


def test_a_world_reports_every_unknown_reference_beside_its_field_errors() -> None:
    d = copy.deepcopy(CAMPAIGN)
    w = d["world"]
    w["objectives"][0]["skill"] = "survivl"
    w["objectives"][1]["from_beat"] = "nowhere"
    w["script"][1]["npc"] = "harow"
    w["default_dc"] = "12"
    assert problems_of(d) == [
        "world.default_dc: must be an integer, not the string '12'",
        "world.objectives[0].skill: skill 'survivl' is not on the character's sheet (nearest: 'survival')",
        ("world.objectives[1].from_beat: unknown beat 'nowhere' (known: captain, ridge, the-drover, the-order, "
        "the-question)"),
        "world.script[1].npc: unknown npc 'harow' (nearest: 'harrow')",
    ]


# ---- our words, not pydantic's ----------------------------------------------------------------


def _patterns(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        return {*([schema["pattern"]] if isinstance(schema.get("pattern"), str) else []),
                *(p for v in schema.values() for p in _patterns(v))}
    if isinstance(schema, list):
        return {p for v in schema for p in _patterns(v)}
    return set()


def test_every_pattern_a_document_field_has_is_said_in_words() -> None:
    used = set().union(*(_patterns(m.model_json_schema()) for m in (Scenario, Suite, Rubric, EstateSpec, CampaignSpec)))
    assert used and used <= set(PATTERN_WORDS), sorted(used - set(PATTERN_WORDS))


def test_an_unknown_field_lists_the_fields_allowed_there() -> None:
    d = copy.deepcopy(BASE)
    d["checks"][0]["expect"]["equal"] = "running"
    d["checks"][1]["expect"] = {"all": [{"path": "backups.nightly.status", "equals": "running", "why": 1}]}
    assert problems_of(d) == [
        "checks[0].expect.equal: unknown field (did you mean 'equals'?)",
        "checks[1].expect.all[0].why: unknown field (allowed: at_least, at_most, case, contains, equals, exists, matches, one_of, path)",
    ]
    with pytest.raises(Exception) as caught:
        Suite.model_validate({"key": "mini", "version": "1", "title": "t", "language": "en", "scenarios": ["a"],
                              "reps_per_case": 3})
    assert describe_errors(caught.value, model=Suite) == [
        "reps_per_case: unknown field (did you mean 'reps_per_scenario'?)"]


JUNK = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False),
                 st.text(max_size=12), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=4),
                                                                                              st.integers(), max_size=2))


def _places(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a document."""
    found = [at] if at else []
    if isinstance(node, dict):
        found += [p for k, v in node.items() for p in _places(v, (*at, k))]
    elif isinstance(node, list):
        found += [p for i, v in enumerate(node) for p in _places(v, (*at, i))]
    return found


PLACES = _places(BASE)


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PLACES), JUNK), min_size=1, max_size=4))
def test_any_mangled_document_gives_one_line_per_problem_in_our_words(changes: list[tuple[Any, Any]]) -> None:
    d = copy.deepcopy(BASE)
    for place, value in changes:
        node: Any = d
        try:
            for key in place[:-1]:
                node = node[key]
            node[place[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change replaced what held this place
    try:
        parse_scenario(d, "case.yaml", get_kit)
    except BadInput as exc:
        lines = [str(p) for p in exc.problems] if isinstance(exc, Problems) else [str(exc)]
        for line in lines:
            assert line.startswith("case.yaml: ") and "\n" not in line, line
            assert not any(words in line for words in PYDANTIC), line
        assert len(lines) == len(set(lines)), lines


# ---- --explain: each check on the untouched world --------------------------------------------


def test_explain_shows_a_safety_check_that_already_fails_and_a_goal_already_met(tmp_path: Path) -> None:
    d = copy.deepcopy(BASE)
    d["checks"][0]["expect"] = {"path": "backups.nightly.status", "equals": "completed"}  # safety: fails already
    d["win_conditions"][0]["expect"] = {"path": "backups.nightly.status", "equals": "running"}  # met already
    path = write(tmp_path / "case.yaml", d)
    result = validate(str(path), "--explain")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ok  forge-backup-running  ") and all(len(line) <= 80 for line in lines[1:])
    text = result.stdout
    assert "score 0/100, does not pass" in text
    row = next(line for line in lines if "backup-still-running" in line)
    assert "safety" in row and "fails" in row and "already fails" in row
    win = next(line for line in lines if "disk-relieved-backup-kept" in line)
    assert "win" in win and "holds" in win and "met by doing nothing" in win

    document = json.loads(validate(str(path), "--explain", "--json").stdout)
    untouched = document["scenarios"][0]["untouched"]
    assert untouched["score"] == 0 and untouched["passed"] is False
    assert untouched["checks"][0] == {"id": "backup-still-running", "weight": 25, "safety": True, "holds": False,
                                      "note": "already fails"}
    assert untouched["win_conditions"] == [{"id": "disk-relieved-backup-kept", "holds": True,
                                            "note": "met by doing nothing"}]
    assert "untouched" not in json.loads(validate(str(path), "--json").stdout)["scenarios"][0]


@pytest.mark.parametrize("suite", ["forge", "academy", "academy-pl"])
def test_the_built_in_suites_validate_and_explain_with_their_hashes(suite: str) -> None:
    result = validate(str(SUITES / suite / "suite.yaml"), "--explain", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["ok"] and document["problems"] == []
    assert {s["id"]: s["hash"] for s in document["scenarios"]} == resolve_suite(suite).scenario_hashes()
    for s in document["scenarios"]:  # no built-in case is won, or fails a safety check, before any agent plays
        assert not s["untouched"]["passed"]
        assert all(c["holds"] for c in s["untouched"]["checks"] if c["safety"]), s


def test_an_unknown_world_field_lists_the_allowed_fields() -> None:
    d = copy.deepcopy(BASE)
    d["world"]["hosts"][0]["colour"] = "red"
    assert problems_of(d) == ["world.hosts[0].colour: unknown field (allowed: disks, evidence, name, processes, "
                              "replica_of, replication_lag_s, role, services, status, tenant)"]
