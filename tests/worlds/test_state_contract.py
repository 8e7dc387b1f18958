"""The world's shape is a contract (issue 24, item 1): each kit's typed state model is the state it
builds and mutates, and the authoring reference is generated from it.

- `materialise` validates every initial state against the kit's `state_model`; the final state of
  every built-in scenario played by every reference agent validates against it too.
- Every place in those states is a row of the kit reference (`assay kit NAME`), and every tool the
  world offers an agent is a tool of the reference, with a one-line effect.
- `assay kit` lists the kits; `assay kit NAME` fits 80 columns; `--json` gives the model's JSON
  Schema, the rows and the tools; docs/state-reference.md is `assay kit --markdown`, byte for byte.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import assay
from assay.agents.loader import load_agent
from assay.agents.reference import CAMPAIGN_AGENTS, REFERENCE_AGENTS
from assay.cli import app
from assay.records import PlannedRun
from assay.run.drivers import play_sync
from assay.run.engine import Limits, open_episode
from assay.scenario.load import LoadedScenario, load_scenario
from assay.scenario.reference import REGENERATE, markdown, reference
from assay.worlds.kits import KITS, get_kit
from assay.worlds.rng import Rng

SUITES = Path(assay.__file__).resolve().parent / "suites"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "state-reference.md"
AGENTS = {"forge": sorted(REFERENCE_AGENTS), "academy": sorted(CAMPAIGN_AGENTS), "academy-pl": sorted(CAMPAIGN_AGENTS)}
PLAYS = [(suite, p.stem, agent) for suite, agents in AGENTS.items()
         for p in sorted((SUITES / suite).glob("*.yaml")) if p.stem not in ("suite", "rubric") for agent in agents]


@functools.cache
def case(suite: str, name: str) -> LoadedScenario:
    return load_scenario(SUITES / suite / f"{name}.yaml", get_kit)


def _places(node: Any, at: str = "") -> list[str]:
    """Every place in a state as a reference row writes it, data keys left to be matched."""
    if isinstance(node, dict):
        return [at] * bool(at) + [p for k, v in node.items() for p in _places(v, f"{at}\x00{k}" if at else k)]
    if isinstance(node, list):
        return [at] + [p for v in node if isinstance(v, dict) for p in _places(v, f"{at}[]")]
    return [at]


def _covered(place: str, rows: list[str]) -> bool:
    """Whether a row names `place` (`<what>` matches one data key, `[]` a list's items)."""
    for row in rows:
        pattern = re.escape(row.replace("[]", "\x01")).replace(r"\.", "\x00")
        pattern = re.sub(r"<[^>]*>", "[^\x00]+", pattern.replace(r"\<", "<").replace(r"\>", ">"))
        if re.fullmatch(pattern.replace("\x01", r"\[\]"), place):
            return True
    return False


@pytest.mark.parametrize(("suite", "name", "agent"), PLAYS, ids=[f"{s}-{n}-{a}" for s, n, a in PLAYS])
def test_every_final_state_of_the_built_in_suites_is_one_the_model_allows(suite: str, name: str, agent: str) -> None:
    loaded = case(suite, name)
    kit = get_kit(loaded.scenario.kit)
    kit.state_model.model_validate(loaded.initial_state)
    record = play_sync(open_episode(loaded, PlannedRun("run-1", 0, loaded.id, loaded.content_hash, 1, 7), Limits()),
                       load_agent(f"reference:{agent}"))
    assert record.status == "completed" or agent in ("idle", "silent"), record.status
    kit.state_model.model_validate(record.final_state)
    rows = [r["path"] for r in reference(kit)["paths"]]
    missing = [p.replace("\x00", ".") for p in _places(record.final_state) if not _covered(p, rows)]
    assert missing == []


@pytest.mark.parametrize("name", sorted(KITS))
def test_the_reference_lists_exactly_the_tools_a_world_offers(name: str) -> None:
    kit = get_kit(name)
    loaded = next(case(s, n) for s, n, _ in PLAYS if case(s, n).scenario.kit == name)
    world = kit.fork(loaded.initial_state, Rng.of(1, loaded.id, 1), loaded.scenario.briefing)
    offered = [t["function"] for t in world.tools()]
    ref = reference(kit)
    # a world offers the reference's tools in its order; an estate world offers those working on a
    # section only where its scenario declares it (tests/worlds/test_living.py: one offering them all)
    shown = {t["name"]: t for t in ref["tools"]}
    assert [n for n in shown if n in {t["name"] for t in offered}] == [t["name"] for t in offered]
    assert set(shown) - {t["name"] for t in offered} <= set(getattr(kit, "declared_tools", ()))
    assert [shown[t["name"]]["arguments"] for t in offered] == [t["parameters"] for t in offered]
    assert all(t["effect"] and "\n" not in t["effect"] for t in ref["tools"])
    assert "effect" not in json.dumps(offered)  # an agent never sees what a tool does to the state


def test_the_docs_page_is_the_generated_reference() -> None:
    generated = markdown(get_kit(name) for name in sorted(KITS))
    assert DOCS.read_text(encoding="utf-8") == generated, f"docs/state-reference.md is stale; run: {REGENERATE}"


def test_assay_kit_lists_the_kits_and_prints_one_in_80_columns() -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["kit"])
    assert listed.exit_code == 0 and [line.split()[0] for line in listed.output.splitlines()] == sorted(KITS)
    for name in KITS:
        shown = runner.invoke(app, ["kit", name], env={"COLUMNS": "200"})
        assert shown.exit_code == 0, shown.output
        assert max(len(line) for line in shown.output.splitlines()) <= 80
        assert "hosts.<host>.isolated" in shown.output if name == "estate" else "objectives.<objective>.met" in shown.output
        assert all(t.name in shown.output for t in get_kit(name).tools)


def test_assay_kit_json_is_the_machine_form() -> None:
    result = CliRunner().invoke(app, ["kit", "estate", "--json"])
    assert result.exit_code == 0
    doc = json.loads(result.output)
    kit = get_kit("estate")
    assert doc["state_schema"] == kit.state_model.model_json_schema()
    assert {"path": "tickets.<ticket>.status", "value": "one of 'open', 'resolved', 'declined', 'escalated'",
            "about": "reply_ticket sets resolved, declined or (needs_info) open; escalate_ticket escalated"} in doc["paths"]
    assert next(t for t in doc["tools"] if t["name"] == "isolate_host")["effect"] == \
        "hosts.<host>.isolated becomes true; appends to changes"
    listed = json.loads(CliRunner().invoke(app, ["kit", "--json"]).output)
    assert [k["kit"] for k in listed] == sorted(KITS)


@pytest.mark.heavy  # starts a process
def test_an_unknown_kit_is_one_line_exit_2() -> None:
    cli = Path(sys.executable).with_name("assay")
    result = subprocess.run([str(cli), "kit", "estat"], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == ["assay: error: kit: unknown kit 'estat' (nearest: 'estate')"]
