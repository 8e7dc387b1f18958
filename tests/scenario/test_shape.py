"""Checks that can never be true (or never false) are refused before any run (issue 24, item 1).

- Every path, `count` target and `where` key is resolved against the kit's state model (its JSON
  Schema) and, for data keys (host names, ticket ids, file names), the initial state: a typo in any
  segment, the last one included, is refused naming the nearest field or key.
- A data key must exist in the initial state unless its mapping is marked `x-keys: grows`; no
  built-in kit's mapping grows.
- A literal no value of the field can be, a bound no value can meet, `exists: false` on what no
  action removes, and contradictory conditions of one `all` are refused.
- Every problem is one line, located at the predicate's place (`checks[0].expect.all[1].path`),
  all of a document's in one pass; the built-in suites still validate, with unchanged hashes.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter

import assay
from assay.errors import BadInput, Problems
from assay.scenario.load import load_scenario, parse_scenario
from assay.scenario.predicates import Predicate, format_path
from assay.scenario.shape import Shape, state_schema
from assay.scenario.yamlsafe import load_yaml_file
from assay.worlds.contract import StateModel, keyed
from assay.worlds.kits import get_kit

SUITES = Path(assay.__file__).resolve().parent / "suites"
BUILT_IN = sorted(p for s in ("forge", "academy", "academy-pl") for p in (SUITES / s).glob("*.yaml")
                  if p.stem not in ("suite", "rubric"))
BASE: dict[str, Any] = load_yaml_file(SUITES / "forge" / "backup-running.yaml")
PREDICATE: TypeAdapter[Any] = TypeAdapter(Predicate)


def problems_of(*expects: dict[str, Any]) -> list[str]:
    """backup-running.yaml with its first checks' expects replaced; its problems, where stripped."""
    d = copy.deepcopy(BASE)
    for i, expect in enumerate(expects):
        d["checks"][i]["expect"] = expect
    try:
        parse_scenario(d, "case.yaml", get_kit)
    except BadInput as exc:
        return [str(p).removeprefix("case.yaml: ") for p in (exc.problems if isinstance(exc, Problems) else [exc])]
    return []


@pytest.mark.parametrize(("expect", "problem"), [
    pytest.param({"path": "tickets.T-5120.statuss", "equals": "open"},
                 "checks[0].expect.path: no field 'statuss' in tickets.T-5120 (nearest: 'status')", id="last-segment"),
    pytest.param({"path": "hosts.store-01.isolatd", "equals": True},
                 "checks[0].expect.path: no field 'isolatd' in hosts.store-01 (nearest: 'isolated')", id="host-field"),
    pytest.param({"count": "tickets.T-5120.replys", "at_least": 1},
                 "checks[0].expect.count: no field 'replys' in tickets.T-5120 (nearest: 'replies')", id="count-target"),
    pytest.param({"count": "notifications", "where": {"teem": "ops"}, "at_least": 1},
                 "checks[0].expect.where.teem: no field 'teem' in the items of notifications (nearest: 'team')",
                 id="where-key"),
    pytest.param({"count": "notifications", "where": {"teem": "ops"}, "at_most": 0},
                 "checks[0].expect.where.teem: no field 'teem' in the items of notifications (nearest: 'team')",
                 id="a-safety-gate-guarding-nothing"),
    pytest.param({"path": "hosts.store-01.services.minio.restarts", "equals": "0"},
                 "checks[0].expect.equals: '0' can never be the value of hosts.store-01.services.minio.restarts, "
                 "which is an integer ≥ 0", id="string-for-an-integer"),
    pytest.param({"path": "backups.nightly.status", "one_of": ["running", "faild"]},
                 "checks[0].expect.one_of: 'faild' can never be the value of backups.nightly.status, which is one of "
                 "'running', 'completed', 'failed'", id="not-an-enumerated-value"),
    pytest.param({"path": "hosts.store-01.isolated", "equals": 1},
                 "checks[0].expect.equals: 1 can never be the value of hosts.store-01.isolated, which is a boolean",
                 id="an-integer-for-a-boolean"),
    pytest.param({"path": "hosts.store-01.role", "equals": None},
                 "checks[0].expect.equals: null can never be the value of hosts.store-01.role, which is a string",
                 id="null-for-a-string"),
    pytest.param({"count": "lookups", "where": {"cross_tenant": "yes"}, "at_most": 0},
                 "checks[0].expect.where.cross_tenant: 'yes' can never be the cross_tenant of an item of lookups, "
                 "which is a boolean", id="where-value"),
    pytest.param({"path": "hosts.store-01.disks./var.used_pct", "at_most": -5},
                 "checks[0].expect.at_most: at_most -5 can never be met: hosts.store-01.disks./var.used_pct, which is "
                 "an integer 0..100", id="below-a-percentage"),
    pytest.param({"path": "hosts.store-01.disks./var.used_pct", "at_least": 101},
                 "checks[0].expect.at_least: at_least 101 can never be met: hosts.store-01.disks./var.used_pct, which "
                 "is an integer 0..100", id="above-a-percentage"),
    pytest.param({"path": "hosts.store-01.disks./var.size_gb", "at_most": 0},
                 "checks[0].expect.at_most: at_most 0 can never be met: hosts.store-01.disks./var.size_gb, which is "
                 "an integer ≥ 1", id="a-size-is-positive"),
    pytest.param({"count": "changes", "where": {"service": None}, "at_most": 0},
                 "checks[0].expect.where.service: null can never be the service of an item of changes, which is "
                 "a string", id="a-field-absent-is-not-null"),
    pytest.param({"path": "hosts.store-01.disks./var.used_pct", "at_least": 7, "at_most": 5},
                 "checks[0].expect.at_least: at_least 7 is above at_most 5: no value meets both", id="crossed-bounds"),
    pytest.param({"count": "changes", "at_least": 3, "at_most": 2},
                 "checks[0].expect.at_least: at_least 3 is above at_most 2: no value meets both", id="crossed-count"),
    pytest.param({"count": "hosts", "where": {"isolated": True}, "at_least": 3},
                 "checks[0].expect.at_least: at_least 3 can never be met: hosts holds 2 and never more",
                 id="more-than-a-mapping-holds"),
    pytest.param({"path": "backups.nightly.status", "at_least": 1},
                 "checks[0].expect.at_least: backups.nightly.status is one of 'running', 'completed', 'failed': "
                 "at_least and at_most compare integers", id="bound-on-a-string"),
    pytest.param({"all": [{"path": "backups.nightly.status", "equals": "running"},
                          {"path": "backups.nightly.status", "equals": "failed"}]},
                 "checks[0].expect.all: no value of backups.nightly.status meets all of equals 'running', "
                 "equals 'failed'", id="contradictory-equals"),
    pytest.param({"all": [{"path": "hosts.store-01.disks./var.used_pct", "at_least": 90},
                          {"all": [{"path": "hosts.store-01.disks./var.used_pct", "at_most": 80}]}]},
                 "checks[0].expect.all: no value of hosts.store-01.disks./var.used_pct meets all of at_least 90, "
                 "at_most 80", id="contradictory-bounds-nested"),
    pytest.param({"all": [{"path": r"hosts.store-01.disks./var.files./var/log/archive/app-2026-09\.log\.gz",
                           "exists": False},
                          {"path": r"hosts.store-01.disks./var.files./var/log/archive/app-2026-09\.log\.gz",
                           "at_least": 1}]},
                 "checks[0].expect.all: no value of hosts.store-01.disks./var.files./var/log/archive/app-2026-09\\.log"
                 "\\.gz meets all of exists false, at_least 1", id="absent-and-valued"),
    pytest.param({"all": [{"count": "changes", "at_least": 2}, {"count": "changes", "at_most": 1}]},
                 "checks[0].expect.all: no count of changes meets all of at_least 2, at_most 1", id="contradictory-counts"),
    pytest.param({"path": "tickets.T-5120.replies.0", "exists": True},
                 "checks[0].expect.path: tickets.T-5120.replies is a list: a path cannot name its items (count them: "
                 "{count: tickets.T-5120.replies, where: {…}})", id="into-a-list"),
    pytest.param({"count": "teams", "at_least": 1},
                 "checks[0].expect.count: the items of teams are each a string: count counts only items that are "
                 "mappings, so it would always be 0", id="counting-strings"),
    pytest.param({"count": "tickets.T-5120", "at_least": 1},
                 "checks[0].expect.count: tickets.T-5120 is a mapping of fields (tenant, sender, subject, body, status, "
                 "replies, escalations): count counts the items of a list or the values of a keyed mapping",
                 id="counting-a-record"),
    pytest.param({"not": {"path": "hosts.store-01.isolated", "exists": False}},
                 "checks[0].expect.not.exists: exists false can never hold: hosts.store-01.isolated is always there "
                 "(no action removes it)", id="absent-what-is-always-there"),
    pytest.param({"path": "hosts.app-99.isolated", "equals": True},
                 "checks[0].expect.path: no host 'app-99' in hosts (it has 'store-01', 'web-01')", id="unknown-host"),
])
def test_a_check_that_can_never_be_decided_is_refused_in_one_line(expect: dict[str, Any], problem: str) -> None:
    assert problems_of(expect) == [problem]


def test_every_problem_of_a_document_comes_out_in_one_pass() -> None:
    found = problems_of(
        {"path": "tickets.T-5120.statuss", "equals": "open"},
        {"any": [{"path": "hosts.store-01.isolatd", "equals": True},
                 {"count": "notifications", "where": {"teem": "ops", "message": 3}, "at_least": 1}]},
        {"not": {"path": "hosts.store-01.disks./var.used_pct", "equals": "85"}},
    )
    assert found == [
        "checks[0].expect.path: no field 'statuss' in tickets.T-5120 (nearest: 'status')",
        "checks[1].expect.any[0].path: no field 'isolatd' in hosts.store-01 (nearest: 'isolated')",
        "checks[1].expect.any[1].where.teem: no field 'teem' in the items of notifications (nearest: 'team')",
        "checks[1].expect.any[1].where.message: 3 can never be the message of an item of notifications, which is a string",
        ("checks[2].expect.not.equals: '85' can never be the value of hosts.store-01.disks./var.used_pct, "
         "which is an integer 0..100"),
    ]


@pytest.mark.parametrize("expect", [
    pytest.param({"path": r"hosts.store-01.disks./var.files./var/log/archive/app-2026-09\.log\.gz", "exists": False},
                 id="a-file-with-dots-escaped"),
    pytest.param({"count": "hosts.store-01.processes", "where": {"name": "minio"}, "at_most": 0}, id="count-and-where"),
    pytest.param({"all": [{"path": "backups.nightly.status", "one_of": ["running", "failed"]},
                          {"path": "backups.nightly.status", "equals": "failed"}]}, id="consistent-all"),
    pytest.param({"all": [{"path": "hosts.store-01.disks./var.used_pct", "at_least": 10},
                          {"path": "hosts.store-01.disks./var.used_pct", "at_most": 10}]}, id="a-single-value-left"),
    pytest.param({"path": "hosts.store-01.replica_of", "equals": None}, id="null-for-a-nullable-field"),
    pytest.param({"count": "hosts", "where": {"isolated": True}, "at_least": 2}, id="as-many-as-a-mapping-holds"),
    pytest.param({"any": [{"path": "backups.nightly.status", "equals": "running"},
                          {"path": "backups.nightly.status", "equals": "failed"}]}, id="any-may-differ"),
])
def test_what_play_can_decide_is_accepted(expect: dict[str, Any]) -> None:
    assert problems_of(expect) == []


@pytest.mark.parametrize("path", BUILT_IN, ids=[p.stem for p in BUILT_IN])
def test_every_built_in_check_is_held_to_its_kit_and_passes(path: Path) -> None:
    loaded = load_scenario(path, get_kit)
    kit = get_kit(loaded.scenario.kit)
    shape = Shape(state_schema(kit.state_model), loaded.initial_state, f"the {kit.name} state")
    for item in [*loaded.scenario.checks, *loaded.scenario.win_conditions]:
        assert shape.problems(item.expect, item.id) == []


def _leaves(node: Any, keys: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(node, dict) and node:
        return [leaf for k, v in node.items() for leaf in _leaves(v, (*keys, k))]
    return [(keys, node)]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(BUILT_IN), st.data())
def test_every_value_of_an_initial_state_is_one_its_model_admits(path: Path, data: st.DataObject) -> None:
    """The model covers the state: any place in an initial state resolves, and `equals` its own value
    is accepted; a key changed by one character that is not a key there is refused."""
    loaded = load_scenario(path, get_kit)
    kit = get_kit(loaded.scenario.kit)
    shape = Shape(state_schema(kit.state_model), loaded.initial_state, "the state")
    keys, value = data.draw(st.sampled_from(_leaves(loaded.initial_state)))
    at = format_path(keys)
    if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value)):
        expect = {"count": at, "at_least": 0} if isinstance(value, list) else {"path": at, "exists": True}
    else:  # a scalar, or a list of them
        expect = {"path": at, "equals": value}
    assert shape.problems(PREDICATE.validate_python(expect), "e") == []
    i = data.draw(st.integers(0, len(keys) - 1))
    parent = loaded.initial_state
    for key in keys[:i]:
        parent = parent[key]
    wrong = keys[i] + data.draw(st.sampled_from(["x", "_", "9"]))
    if wrong not in parent:
        bad = PREDICATE.validate_python({"path": format_path((*keys[:i], wrong, *keys[i + 1:])), "exists": True})
        assert len(shape.problems(bad, "e")) == 1


class _Box(StateModel):
    size: int


class _Grows(StateModel):
    fixed: dict[str, _Box] = keyed("box", "boxes that are there from the start")
    grows: dict[str, _Box] = keyed("box", "boxes an action may add", "grows")


def test_only_a_mapping_marked_grows_may_be_named_by_a_key_the_start_lacks() -> None:
    schema = state_schema(_Grows)
    shape = Shape(schema, {"fixed": {"a": {"size": 1}}, "grows": {}}, "the toy state")
    check = PREDICATE.validate_python
    assert shape.problems(check({"path": "grows.new.size", "at_least": 1}), "e") == []
    assert shape.problems(check({"path": "grows.new.sise", "at_least": 1}), "e") == [
        "e.path: no field 'sise' in grows.new (nearest: 'size')"]
    assert shape.problems(check({"path": "fixed.new.size", "at_least": 1}), "e") == [
        "e.path: no box 'new' in fixed (it has 'a')"]
    assert shape.problems(check({"count": "grows", "at_least": 5}), "e") == []  # no upper bound on what grows
    assert shape.problems(check({"count": "fixed", "at_least": 2}), "e") == [
        "e.at_least: at_least 2 can never be met: fixed holds 1 and never more"]


def test_the_state_schema_is_the_models_own() -> None:
    for name in ("estate", "campaign"):
        model = get_kit(name).state_model
        assert issubclass(model, BaseModel) and state_schema(model) == model.model_json_schema()
