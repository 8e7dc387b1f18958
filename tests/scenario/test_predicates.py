"""The predicate language: what a check may say about a final state, and what `holds` means.

Predicates are data, parsed strictly (one condition per value test, no coercion) and evaluated
without Python's bool/int conflation: `True` is not `1`, and a missing path is simply false.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from assay.scenario.predicates import AllOf, AnyOf, CountOf, NotOf, Predicate, ValueAt, holds

P = TypeAdapter(Predicate)


def pred(raw: dict[str, Any]) -> Any:
    return P.validate_python(raw)


STATE: dict[str, Any] = {
    "hosts": {
        "web-01": {"isolated": True, "cpu": 1, "role": "web", "lag": None, "tags": ["a", "b"]},
        "web-02": {"isolated": False, "cpu": 0, "role": "web", "load": 3.5},
        "db-01": {"isolated": False, "cpu": 97, "role": "db"},
    },
    "changes": [
        {"action": "isolate_host", "host": "web-01"},
        {"action": "notify", "team": "ops"},
        "not-a-mapping",
        {"action": "isolate_host", "host": "web-02", "forced": 1},
    ],
    "notifications": [],
    "lookups": [{"cross_tenant": True}, {"cross_tenant": False}],
    "disks": {"/var": {"used_pct": 75}},
    "empty": {},
}


def check(raw: dict[str, Any], expected: bool) -> None:
    assert holds(pred(raw), STATE) is expected, raw


# ---- parsing -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ({"path": "a.b", "equals": 1}, ValueAt),
        ({"path": "a", "exists": False}, ValueAt),
        ({"path": "a", "at_least": 1, "at_most": 3}, ValueAt),
        ({"count": "a", "where": {"x": True}, "at_most": 0}, CountOf),
        ({"all": [{"path": "a", "equals": 1}]}, AllOf),
        ({"any": [{"path": "a", "equals": 1}]}, AnyOf),
        ({"not": {"path": "a", "equals": 1}}, NotOf),
        ({"not": {"all": [{"any": [{"count": "a", "at_least": 1}]}]}}, NotOf),
    ],
)
def test_predicates_parse_from_dicts(raw: dict[str, Any], kind: type) -> None:
    assert isinstance(pred(raw), kind)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param({"paht": "a", "equals": 1}, id="no-known-key"),
        pytest.param({"path": "a"}, id="no-condition"),
        pytest.param({"path": "a", "equals": 1, "one_of": [1]}, id="two-conditions"),
        pytest.param({"path": "a", "exists": True, "at_least": 1}, id="exists-and-bound"),
        pytest.param({"path": "a", "equals": 1, "extra": 2}, id="unknown-field"),
        pytest.param({"path": "a", "at_least": "3"}, id="bound-as-string"),
        pytest.param({"path": "a", "at_least": True}, id="bound-as-bool"),
        pytest.param({"path": "a", "exists": 1}, id="exists-as-int"),
        pytest.param({"path": "a", "equals": 1.5}, id="float-is-not-a-scalar"),
        pytest.param({"path": "a", "equals": {"b": 1}}, id="mapping-is-not-a-scalar"),
        pytest.param({"path": "a..b", "equals": 1}, id="empty-path-segment"),
        pytest.param({"path": "a b", "equals": 1}, id="space-in-path"),
        pytest.param({"count": "a"}, id="count-without-bounds"),
        pytest.param({"count": "a", "at_least": -1}, id="count-negative-bound"),
        pytest.param({"all": []}, id="empty-all"),
        pytest.param({"any": []}, id="empty-any"),
        pytest.param({"not": "a"}, id="not-of-a-string"),
        pytest.param("a.b == 1", id="a-string"),
    ],
)
def test_malformed_predicates_are_refused(raw: Any) -> None:
    with pytest.raises(ValidationError):
        pred(raw)


def test_equals_null_is_a_real_condition() -> None:
    p = pred({"path": "hosts.web-01.lag", "equals": None})
    assert holds(p, STATE)
    assert not holds(p, {"hosts": {"web-01": {}}})  # missing is not null
    assert P.dump_python(p, by_alias=True) == {"path": "hosts.web-01.lag", "equals": None}


@pytest.mark.parametrize(
    "raw",
    [
        {"path": "a.b", "equals": None},
        {"path": "a.b", "equals": False},
        {"path": "a.b", "at_least": 1, "at_most": 2},
        {"path": "a", "exists": False},
        {"count": "a", "where": {"k": 1}, "at_most": 0},
        {"not": {"any": [{"path": "a", "one_of": ["x", None]}, {"count": "b", "at_least": 2}]}},
    ],
)
def test_dump_validates_back_to_the_same_predicate(raw: dict[str, Any]) -> None:
    p = pred(raw)
    assert pred(P.dump_python(p, mode="json", by_alias=True)) == p


def test_roots_name_the_top_level_keys_a_predicate_reads() -> None:
    p = pred({"all": [{"path": "hosts.web-01.isolated", "equals": True},
                      {"not": {"count": "lookups", "at_least": 1}},
                      {"any": [{"path": "alerts.A-1.status", "equals": "open"}]}]})
    assert p.roots() == {"hosts", "lookups", "alerts"}


# ---- value tests ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # equals, without bool/int conflation
        ({"path": "hosts.web-01.isolated", "equals": True}, True),
        ({"path": "hosts.web-01.isolated", "equals": 1}, False),
        ({"path": "hosts.web-01.cpu", "equals": True}, False),
        ({"path": "hosts.web-01.cpu", "equals": 1}, True),
        ({"path": "hosts.web-02.cpu", "equals": False}, False),
        ({"path": "hosts.web-02.isolated", "equals": 0}, False),
        ({"path": "hosts.web-02.isolated", "equals": False}, True),
        ({"path": "hosts.web-01.role", "equals": "web"}, True),
        ({"path": "hosts.web-01.role", "equals": "Web"}, False),
        ({"path": "hosts.web-01.tags", "equals": ["a", "b"]}, True),
        ({"path": "hosts.web-01.tags", "equals": ["b", "a"]}, False),
        ({"path": "hosts.web-01.cpu", "equals": "1"}, False),
        # missing paths are false, whatever the condition
        ({"path": "hosts.web-09.isolated", "equals": False}, False),
        ({"path": "hosts.web-01.isolated.deeper", "equals": True}, False),
        ({"path": "hosts.web-01.tags.0", "equals": "a"}, False),  # paths do not index lists
        ({"path": "hosts.web-09.cpu", "at_most": 100}, False),
        ({"path": "hosts.web-09.role", "one_of": ["web", "db"]}, False),
        ({"path": "nothing", "equals": None}, False),
        # exists
        ({"path": "hosts.web-01", "exists": True}, True),
        ({"path": "hosts.web-01.lag", "exists": True}, True),  # present, even though null
        ({"path": "hosts.web-09", "exists": True}, False),
        ({"path": "hosts.web-09", "exists": False}, True),
        ({"path": "hosts.web-01", "exists": False}, False),
        # one_of
        ({"path": "hosts.db-01.role", "one_of": ["web", "db"]}, True),
        ({"path": "hosts.db-01.role", "one_of": ["web"]}, False),
        ({"path": "hosts.web-01.isolated", "one_of": [1, "true"]}, False),
        ({"path": "hosts.web-01.cpu", "one_of": [True, 1]}, True),
        ({"path": "hosts.web-01.lag", "one_of": [None]}, True),
        # at_least / at_most on ints only
        ({"path": "hosts.db-01.cpu", "at_least": 97}, True),
        ({"path": "hosts.db-01.cpu", "at_least": 98}, False),
        ({"path": "hosts.db-01.cpu", "at_most": 97}, True),
        ({"path": "hosts.db-01.cpu", "at_most": 96}, False),
        ({"path": "hosts.db-01.cpu", "at_least": 90, "at_most": 100}, True),
        ({"path": "hosts.db-01.cpu", "at_least": 90, "at_most": 95}, False),
        ({"path": "disks./var.used_pct", "at_most": 85}, True),
        ({"path": "hosts.web-01.isolated", "at_least": 1}, False),  # a bool is not a number here
        ({"path": "hosts.web-02.isolated", "at_most": 0}, False),
        ({"path": "hosts.web-01.role", "at_least": 0}, False),
        ({"path": "hosts.web-02.load", "at_least": 3}, False),  # nor is a float
        ({"path": "hosts.web-01.lag", "at_most": 0}, False),
        ({"path": "hosts.web-01.tags", "at_least": 0}, False),
    ],
)
def test_value_at(raw: dict[str, Any], expected: bool) -> None:
    check(raw, expected)


# ---- counting ------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"count": "changes", "at_least": 3}, True),  # every mapping item, the string is not counted
        ({"count": "changes", "at_least": 4}, False),
        ({"count": "changes", "where": {"action": "isolate_host"}, "at_least": 2, "at_most": 2}, True),
        ({"count": "changes", "where": {"action": "isolate_host", "host": "web-02"}, "at_most": 1}, True),
        ({"count": "changes", "where": {"action": "isolate_host", "host": "web-02"}, "at_most": 0}, False),
        ({"count": "changes", "where": {"forced": True}, "at_most": 0}, True),  # 1 is not True
        ({"count": "changes", "where": {"forced": 1}, "at_least": 1}, True),
        ({"count": "changes", "where": {"team": "ops"}, "at_least": 1}, True),  # missing field: no match
        ({"count": "notifications", "at_most": 0}, True),
        ({"count": "notifications", "at_least": 1}, False),
        ({"count": "lookups", "where": {"cross_tenant": True}, "at_most": 0}, False),
        ({"count": "lookups", "where": {"cross_tenant": False}, "at_least": 1}, True),
        # over a mapping's values
        ({"count": "hosts", "at_least": 3, "at_most": 3}, True),
        ({"count": "hosts", "where": {"role": "web"}, "at_least": 2}, True),
        ({"count": "hosts", "where": {"role": "web", "isolated": False}, "at_most": 1}, True),
        ({"count": "hosts", "where": {"isolated": 0}, "at_least": 1}, False),
        ({"count": "empty", "at_most": 0}, True),
        # not a collection, or missing: false
        ({"count": "hosts.web-01.role", "at_most": 10}, False),
        ({"count": "missing", "at_most": 0}, False),
        ({"count": "hosts.web-01.tags", "at_least": 1}, False),  # items that are not mappings never match
        ({"count": "hosts.web-01.tags", "at_most": 0}, True),
    ],
)
def test_count_of(raw: dict[str, Any], expected: bool) -> None:
    check(raw, expected)


# ---- combinators ---------------------------------------------------------------------------

T = {"path": "hosts.web-01.isolated", "equals": True}
F = {"path": "hosts.web-01.isolated", "equals": False}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"all": [T]}, True),
        ({"all": [T, T]}, True),
        ({"all": [T, F]}, False),
        ({"any": [F, T]}, True),
        ({"any": [F, F]}, False),
        ({"not": T}, False),
        ({"not": F}, True),
        ({"not": {"not": T}}, True),
        ({"not": {"path": "missing", "equals": 1}}, True),  # not-missing holds: say `exists` if you mean it
        ({"all": [T, {"any": [F, {"not": F}]}]}, True),
        ({"any": [{"all": [T, F]}, {"not": {"any": [T]}}]}, False),
        ({"all": [{"count": "hosts", "where": {"role": "db"}, "at_least": 1},
                  {"not": {"count": "lookups", "where": {"cross_tenant": True}, "at_least": 1}}]}, False),
    ],
)
def test_combinators(raw: dict[str, Any], expected: bool) -> None:
    check(raw, expected)


def test_holds_refuses_what_is_not_a_predicate() -> None:
    with pytest.raises(TypeError):
        holds({"path": "a", "equals": 1}, STATE)


# ---- property: a leaf's own value always holds ---------------------------------------------

KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-/ABC", min_size=1, max_size=5)
SCALAR = st.none() | st.booleans() | st.integers(min_value=-(2**40), max_value=2**40) | st.text(max_size=6)
LEAF = SCALAR | st.lists(SCALAR, max_size=3)
STATES = st.recursive(LEAF, lambda inner: st.dictionaries(KEY, inner, min_size=1, max_size=4), max_leaves=12).filter(
    lambda s: isinstance(s, dict))


def leaves(node: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    if isinstance(node, dict):
        return [leaf for k, v in node.items() for leaf in leaves(v, (*prefix, k))]
    return [(".".join(prefix), node)]


@pytest.mark.slow  # seconds of work: left out of `pytest --pure`
@settings(max_examples=80, deadline=None)
@given(STATES, st.data())
def test_a_leaf_equals_its_own_value(state: dict[str, Any], data: st.DataObject) -> None:
    path, value = data.draw(st.sampled_from(leaves(state)))
    p = pred({"path": path, "equals": value})
    assert holds(p, state)
    assert holds(pred({"path": path, "exists": True}), state)
    assert not holds(pred({"not": {"path": path, "equals": value}}), state)
    if not isinstance(value, list):  # one_of takes scalars
        assert holds(pred({"path": path, "one_of": [value]}), state)
    if isinstance(value, bool):  # the same number, the wrong type
        assert not holds(pred({"path": path, "equals": int(value)}), state)
    if isinstance(value, int) and not isinstance(value, bool):
        assert holds(pred({"path": path, "at_least": value, "at_most": value}), state)
        assert not holds(pred({"path": path, "at_least": value + 1}), state)
        if value in (0, 1):
            assert not holds(pred({"path": path, "equals": bool(value)}), state)


# ---- text predicates: contains / matches, on a path and inside `where` ------------------------

TEXTS: dict[str, Any] = {
    "tickets": {"T-1": {"body": "Here is the key: AKIA1234 — please rotate",
                        "replies": [{"message": "Rotated. The old key AKIA1234 is revoked.", "team": "sec"},
                                    {"message": "done", "team": "ops"}]}},
    "n": 3,
}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"path": "tickets.T-1.body", "contains": "AKIA1234"}, True),
        ({"path": "tickets.T-1.body", "contains": "akia1234"}, False),  # case counts by default
        ({"path": "tickets.T-1.body", "contains": "akia1234", "case": "insensitive"}, True),
        ({"path": "tickets.T-1.body", "matches": r"AKIA[0-9]{4}"}, True),
        ({"path": "tickets.T-1.body", "matches": r"^AKIA"}, False),  # search, anchored by the pattern
        ({"path": "tickets.T-1.body", "matches": r"please ROTATE$", "case": "insensitive"}, True),
        ({"path": "n", "contains": "3"}, False),  # not a string: never
        ({"path": "tickets.T-9.body", "contains": "x"}, False),  # missing: false
        ({"count": "tickets.T-1.replies", "where": {"message": {"contains": "AKIA"}}, "at_least": 1}, True),
        ({"count": "tickets.T-1.replies", "where": {"message": {"contains": "AKIA"}}, "at_most": 0}, False),
        ({"count": "tickets.T-1.replies", "where": {"message": {"matches": "^done$"}, "team": "ops"},
          "at_least": 1, "at_most": 1}, True),
        ({"count": "tickets.T-1.replies", "where": {"message": {"matches": "^done$"}, "team": "sec"},
          "at_least": 1}, False),
    ],
)
def test_text_predicates(raw: dict[str, Any], expected: bool) -> None:
    assert holds(pred(raw), TEXTS) is expected


@pytest.mark.parametrize(
    "raw",
    [
        {"path": "a", "contains": ""},
        {"path": "a", "contains": "x", "equals": "x"},
        {"path": "a", "equals": "x", "case": "insensitive"},
        {"path": "a", "contains": "x", "case": "upper"},
        {"path": "a", "matches": "("},
        {"path": "a", "matches": "(a+)+$"},
        {"path": "a", "matches": "(?:x|y*)*"},
        {"path": "a", "matches": "x" * 201},
        {"count": "a", "where": {"f": {"contains": "x", "matches": "x"}}, "at_most": 0},
        {"count": "a", "where": {"f": {}}, "at_most": 0},
        {"count": "a", "where": {"f": {"contain": "x"}}, "at_most": 0},
    ],
)
def test_malformed_text_predicates_are_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        pred(raw)


def test_a_text_test_dumps_only_what_was_given_and_reads_back_the_same() -> None:
    raw = {"count": "a", "where": {"f": {"contains": "x"}, "g": "ops"}, "at_most": 0}
    parsed = pred(raw)
    dumped = parsed.model_dump(by_alias=True, exclude_none=True)
    assert dumped == raw and pred(dumped) == parsed


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(min_size=1, max_size=5))
def test_contains_is_substring_and_insensitive_is_casefold(text: str, needle: str) -> None:
    state = {"s": text}
    assert holds(pred({"path": "s", "contains": needle}), state) is (needle in text)
    assert holds(pred({"path": "s", "contains": needle, "case": "insensitive"}), state) is (
        needle.casefold() in text.casefold())
    literal = "".join("\\" + c if not c.isalnum() else c for c in needle)
    if len(literal) <= 200:  # a literal pattern matches where the text contains it
        assert holds(pred({"path": "s", "matches": literal}), state) is (needle in text)
