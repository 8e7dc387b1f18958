"""The built-in academy suites as data: every scenario loads and validates against its world, each
safety trait has a scenario aimed at it, the authoring conventions the reference players rely on
hold, the rubric is a valid rubric, the CLI accepts the suites — and nothing hidden reaches a player.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

import assay
from assay.agents.loader import AgentFactory, load_agent
from assay.scenario.load import LoadedScenario, load_scenario
from assay.scenario.shape import Shape, state_schema
from assay.scenario.suite import parse_suite
from assay.scenario.yamlsafe import load_yaml_file
from assay.service.results import results_json
from assay.service.runs import run_suite
from assay.service.suites import SuiteBundle, builtin_suite_names, resolve_suite
from assay.store import Store
from assay.worlds.campaign.phrases import PHRASEBOOKS, primary
from assay.worlds.kits import get_kit
from assay.store.runs_repo import RunsRepo
from tests.support.forkserver import assay_command

try:  # `python -m pytest` puts the repo root on sys.path; a bare `pytest` only tests/
    from tests.run.test_hidden import Secret, Seen, _fragments, recording, secrets_of
except ModuleNotFoundError:  # pragma: no cover
    from run.test_hidden import Secret, Seen, _fragments, recording, secrets_of  # type: ignore[no-redef]

SUITES_DIR = Path(assay.__file__).resolve().parent / "suites"
SUITES = {"academy": "en", "academy-pl": "pl"}
KIND_OF_TRAIT = {
    "no_unauthorized_disclosure_conduct": "extract_secret",
    "manipulation_resistance": "manipulation",
    "harmful_compliance_refusal": "request_harm",
    "policy_adherence_under_pressure": "break_rules",
}
QUOTES = re.compile('["\u201c\u201d\u201e\u00ab\u00bb]')
CAPABILITY = ["goal_pursuit", "collaboration", "rules_mastery", "narrative_contribution"]


def files(suite: str) -> list[Path]:
    doc = load_yaml_file(SUITES_DIR / suite / "suite.yaml")
    return [SUITES_DIR / suite / rel for rel in doc["scenarios"]]


ALL = [(suite, path) for suite in SUITES for path in files(suite)]


def load(path: Path) -> LoadedScenario:
    return load_scenario(path, get_kit)


def beats(case: LoadedScenario) -> list[dict[str, Any]]:
    script = case.initial_state["script"]
    return [script["beats"][b] for b in script["order"]]


# ---- the suite documents ---------------------------------------------------------------------------

@pytest.mark.parametrize("suite, language", SUITES.items())
def test_the_suite_document_pins_what_the_issue_asks(suite: str, language: str) -> None:
    doc = parse_suite(load_yaml_file(SUITES_DIR / suite / "suite.yaml"), suite)
    assert doc.key == suite and doc.language == language and doc.reps_per_scenario == 5
    assert doc.facilitator_model == "scripted" and doc.visibility == "public"
    assert {b.agent for b in doc.baselines} == {"reference:steadfast", "reference:pushover", "reference:silent"}
    assert suite in builtin_suite_names()
    bundle = resolve_suite(suite)
    assert [s.id for s in bundle.scenarios] == [load(p).id for p in files(suite)]


def test_academy_has_four_scenarios_and_academy_pl_two() -> None:
    assert len(files("academy")) >= 4 and len(files("academy-pl")) == 2


@pytest.mark.parametrize("suite, path", ALL, ids=[p.stem for _, p in ALL])
def test_every_scenario_loads_validates_and_its_checks_resolve(suite: str, path: Path) -> None:
    case = load(path)
    s = case.scenario
    assert s.kit == "campaign" and s.frozen_on == "2026-12-01" and s.id.startswith("academy-")
    assert s.language == SUITES[suite] == case.world_spec.campaign_language  # one language, stated twice
    shape = Shape(state_schema(get_kit("campaign").state_model), case.initial_state, "the campaign state")
    for item in [*s.checks, *s.win_conditions]:
        assert shape.problems(item.expect, item.id) == [], item.id
    assert any(c.safety for c in s.checks) and any(not c.safety for c in s.checks)
    assert s.win_conditions


@pytest.mark.parametrize("trait, kind", KIND_OF_TRAIT.items())
def test_each_safety_trait_has_an_academy_scenario_aimed_at_it(trait: str, kind: str) -> None:
    aimed = [p for p in files("academy") if any(b["kind"] == kind for b in beats(load(p)))]
    assert aimed, trait
    for p in aimed:  # and a safety check over what giving in to it would leave in the state
        assert any(c.safety for c in load(p).scenario.checks)


@pytest.mark.parametrize("suite, path", ALL, ids=[p.stem for _, p in ALL])
def test_the_authoring_conventions_the_reference_players_read_hold(suite: str, path: Path) -> None:
    """Story lines and reactions quote nobody; pressure is a quoted demand; a question after a secret
    names it by its sheet label; a deed demand holds the words of giving in; no demand says no."""
    case = load(path)
    secrets = case.initial_state["character"]["secrets"]
    refusals = PHRASEBOOKS[primary(case.scenario.language)].refusals
    for beat in beats(case):
        for key in ("on_refuse", "on_comply"):
            assert not QUOTES.search(beat.get(key) or ""), (beat["id"], key)
        if beat["kind"] == "story":
            assert not QUOTES.search(beat["text"]), beat["id"]
            continue
        for key in ("text", "press"):
            said = " ".join(beat[key].split())
            assert QUOTES.search(said), (beat["id"], key)
            assert not any(r in said.casefold() for r in refusals), (beat["id"], key)
            if beat["kind"] == "extract_secret":
                assert secrets[beat["secret"]]["about"].casefold() in said.casefold(), (beat["id"], key)
            else:
                assert any(all(w in said.casefold() for w in entry.casefold().split()) for entry in beat["comply"]), \
                    (beat["id"], key)
    for secret in secrets.values():  # a tell is in the secret, never in what the facilitator says
        for beat in beats(case):
            said = " ".join(beat.get(k) or "" for k in ("text", "press", "on_refuse", "on_comply")).casefold()
            assert not any(t.casefold() in said for t in secret["tells"])


@pytest.mark.parametrize("suite", SUITES)
def test_the_rubric_is_a_valid_rubric_with_the_eight_traits(suite: str) -> None:
    import assay.scenario.rubric as rubric_mod
    rubric = rubric_mod.load_rubric(SUITES_DIR / suite / "rubric.yaml")
    assert rubric.key == suite
    assert rubric.capability_keys == CAPABILITY
    assert sorted(rubric.safety_keys) == sorted(KIND_OF_TRAIT)
    assert rubric.without_evidence() == []


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.heavy  # starts a process
def test_assay_validate_accepts_the_suite(suite: str) -> None:
    for target in (suite, str(SUITES_DIR / suite)):
        done = subprocess.run([*assay_command(), "validate", target], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert [line.split()[1] for line in done.stdout.splitlines()] == [load(p).id for p in files(suite)]


# ---- hidden stays hidden -----------------------------------------------------------------------

def campaign_secrets(bundle: SuiteBundle) -> list[Secret]:
    """What a debrief may show and a player never sees: the hidden truth, the checks (as forge's
    scan has them), and the cast's agendas and the facilitator's brief."""
    found = secrets_of(bundle)
    for case in bundle.scenarios:
        for npc in case.initial_state["npcs"].values():
            found += [(case.id, "npc agenda", (frag,)) for frag in _fragments(npc["agenda"]) if npc["agenda"]]
        brief = case.initial_state["campaign"]["facilitator_brief"]
        found += [(case.id, "facilitator brief", (frag,)) for frag in _fragments(brief) if brief]
    return found


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("name", ["steadfast", "pushover", "silent"])
def test_a_player_never_receives_the_hidden_truth_the_checks_or_the_agendas(sqlite_store: Store, suite: str, name: str) -> None:
    bundle = resolve_suite(suite)
    secrets = campaign_secrets(bundle)
    assert {what for _, what, _ in secrets} >= {"hidden_truth", "check id", "check expect", "npc agenda"}
    seen = Seen()
    factory = AgentFactory(f"python:test_academy:recording_{name}", recording(load_agent(f"reference:{name}").make, seen))
    result = run_suite(bundle, factory=factory, trials=2, workers=2, store=sqlite_store)
    trials = [t for c in results_json(sqlite_store, result.batch_id, actor=OPERATOR)["cases"] for t in c["trials"]]
    assert {t["status"] for t in trials} == {"completed"} and len(seen.raw) >= 2 * len(trials)
    assert seen.leaks(secrets) == []
    stored = Seen()  # the transcript: what the player saw and said, and the world's notes beside it
    for row in RunsRepo(sqlite_store).runs_for_batch(result.batch_id):
        stored.add(row.transcript)
    assert stored.leaks(secrets) == []


def test_the_scan_would_find_a_leak() -> None:
    bundle = resolve_suite("academy")
    secrets = campaign_secrets(bundle)
    seen = Seen()
    seen.add([{"role": "tool", "content": json.dumps(case.document)} for case in bundle.scenarios])
    assert [(cid, what) for cid, what, _ in seen.leaks(secrets)] == [(cid, what) for cid, what, _ in secrets]
