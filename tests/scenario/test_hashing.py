"""Content hashes: what they cover, and what they must ignore.

A scenario is versioned by `content_hash` = sha256 of the RFC 8785 canonical JSON of
`{"document": <validated document>, "world": <fingerprint of the materialised initial state>}`.
`checks_hash` covers the checks alone, so a frozen case can change its prose but not its checks.
Layout (key order, quoting, YAML vs JSON) must never move a hash; any change of meaning must.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import assay
from assay.canonical import canonical_bytes, canonical_hash
from assay.scenario.load import LoadedScenario, load_scenario, parse_scenario
from assay.worlds.kits import get_kit
from assay.scenario.yamlsafe import load_yaml_file

FORGE = Path(assay.__file__).resolve().parent / "suites" / "forge"
CASES = sorted(p.stem for p in FORGE.glob("*.yaml") if p.stem != "suite")
FAST = settings(max_examples=40, deadline=None)
SLOW = settings(max_examples=15, deadline=None)  # each example materialises a world


def raw(case: str) -> dict[str, Any]:
    return load_yaml_file(FORGE / f"{case}.yaml")


def parse(doc: dict[str, Any]) -> LoadedScenario:
    return parse_scenario(doc, "test-document", get_kit)


# ---- canonical_hash ------------------------------------------------------------------------

SAFE_INT = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)  # the JSON-exact integers
json_values = st.recursive(
    st.none() | st.booleans() | SAFE_INT | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


def permuted(value: Any, rnd: random.Random) -> Any:
    """The same JSON value with every mapping's keys in a random order."""
    if isinstance(value, dict):
        keys = list(value)
        rnd.shuffle(keys)
        return {k: permuted(value[k], rnd) for k in keys}
    if isinstance(value, list):
        return [permuted(v, rnd) for v in value]
    return value


def tagged(value: Any) -> Any:
    """A normal form in which two values are equal exactly when they are the same JSON value."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, str):
        return ("str", value)
    if value is None:
        return ("null",)
    if isinstance(value, list):
        return ("list", tuple(tagged(v) for v in value))
    return ("object", frozenset((k, tagged(v)) for k, v in value.items()))


@FAST
@given(json_values, st.randoms(use_true_random=False))
def test_canonical_hash_ignores_key_order(value: Any, rnd: random.Random) -> None:
    shuffled = permuted(value, rnd)
    assert canonical_bytes(shuffled) == canonical_bytes(value)
    assert canonical_hash(shuffled) == canonical_hash(value)


@FAST
@given(json_values, json_values)
def test_distinct_json_values_have_distinct_hashes(a: Any, b: Any) -> None:
    assume(tagged(a) != tagged(b))
    assert canonical_hash(a) != canonical_hash(b)


@pytest.mark.parametrize(("a", "b"), [(True, 1), (False, 0), (None, False), ("1", 1), ([], {}), ([1, 2], [2, 1])])
def test_json_types_are_not_conflated(a: Any, b: Any) -> None:
    assert canonical_hash(a) != canonical_hash(b)


def test_canonical_form_is_rfc8785() -> None:
    assert canonical_bytes({"b": 1, "a": [True, None, "é"]}) == '{"a":[true,null,"é"],"b":1}'.encode()
    assert canonical_hash({}) == "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


# ---- scenario hashes -----------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES)
def test_loading_the_same_file_twice_gives_the_same_hashes(case: str) -> None:
    first, second = load_scenario(FORGE / f"{case}.yaml", get_kit), load_scenario(FORGE / f"{case}.yaml", get_kit)
    assert (first.content_hash, first.checks_hash, first.world_fingerprint) == (
        second.content_hash, second.checks_hash, second.world_fingerprint)


@pytest.mark.parametrize("case", CASES)
def test_hash_is_defined_over_document_and_world_fingerprint(case: str) -> None:
    loaded = load_scenario(FORGE / f"{case}.yaml", get_kit)
    assert loaded.world_fingerprint == canonical_hash(loaded.initial_state)
    assert loaded.content_hash == canonical_hash({"document": loaded.document, "world": loaded.world_fingerprint})
    assert loaded.checks_hash == canonical_hash(loaded.document["checks"])
    assert all(len(h) == 64 for h in (loaded.content_hash, loaded.checks_hash, loaded.world_fingerprint))


@pytest.mark.parametrize("case", CASES)
def test_reserialising_with_sorted_keys_keeps_the_hash(case: str, tmp_path: Path) -> None:
    original = load_scenario(FORGE / f"{case}.yaml", get_kit)
    as_yaml = tmp_path / "sorted.yaml"
    as_yaml.write_text(yaml.safe_dump(raw(case), sort_keys=True, allow_unicode=True), encoding="utf-8")
    as_json = tmp_path / "as.json.yaml"  # JSON is YAML: the same document in another layout
    as_json.write_text(json.dumps(raw(case), indent=1, sort_keys=True), encoding="utf-8")
    assert load_scenario(as_yaml, get_kit).content_hash == original.content_hash
    assert load_scenario(as_json, get_kit).content_hash == original.content_hash


@SLOW
@given(st.sampled_from(CASES), st.randoms(use_true_random=False))
def test_any_key_order_gives_the_same_content_hash(case: str, rnd: random.Random) -> None:
    assert parse(permuted(raw(case), rnd)).content_hash == parse(raw(case)).content_hash


@pytest.mark.parametrize("case", CASES)
def test_stored_document_revalidates_to_the_same_hash(case: str) -> None:
    """The stored (validated, JSON) document is what a replay parses again: it must round-trip."""
    loaded = load_scenario(FORGE / f"{case}.yaml", get_kit)
    again = parse(json.loads(json.dumps(loaded.document)))
    assert again.content_hash == loaded.content_hash
    assert again.document == loaded.document


def test_writing_a_default_out_does_not_change_the_hash() -> None:
    doc = raw("second-host")
    assert "safety" not in doc["checks"][0]
    explicit = copy.deepcopy(doc)
    explicit["checks"][0]["safety"] = False
    explicit["world"]["teams"] = ["ops", "security", "storage", "database", "privacy"]
    explicit["world"]["hosts"][0]["status"] = "up"
    assert parse(explicit).content_hash == parse(doc).content_hash


@pytest.mark.parametrize("case", CASES)
def test_briefing_change_moves_content_hash_but_not_checks_hash(case: str) -> None:
    before = parse(raw(case))
    doc = raw(case)
    doc["briefing"] += "Also: be quick.\n"
    after = parse(doc)
    assert after.content_hash != before.content_hash
    assert after.checks_hash == before.checks_hash
    assert after.world_fingerprint == before.world_fingerprint


def test_hidden_truth_and_win_conditions_are_covered_but_are_not_checks() -> None:
    before = parse(raw("wrong-fix"))
    for field, change in (("hidden_truth", lambda d: d.update(hidden_truth=d["hidden_truth"] + "!")),
                          ("win_conditions", lambda d: d["win_conditions"][0].update(description="changed"))):
        doc = raw("wrong-fix")
        change(doc)
        after = parse(doc)
        assert after.content_hash != before.content_hash, field
        assert after.checks_hash == before.checks_hash, field


def test_check_description_is_part_of_the_checks() -> None:
    doc = raw("all-quiet")
    doc["checks"][1]["description"] = "The alert was acknowledged, eventually."
    assert parse(doc).checks_hash != parse(raw("all-quiet")).checks_hash


@SLOW
@given(st.data())
def test_moving_weight_between_two_checks_changes_checks_hash(data: st.DataObject) -> None:
    case = data.draw(st.sampled_from(CASES))
    doc = raw(case)
    checks = doc["checks"]
    i, j = data.draw(st.permutations(range(len(checks))))[:2]
    wi, wj = checks[i]["weight"], checks[j]["weight"]
    delta = data.draw(st.integers(min_value=-min(wi, 100 - wj), max_value=min(wj, 100 - wi)).filter(bool))
    checks[i]["weight"], checks[j]["weight"] = wi + delta, wj - delta
    assert sum(c["weight"] for c in checks) == 100
    before, after = parse(raw(case)), parse(doc)
    assert after.checks_hash != before.checks_hash
    assert after.content_hash != before.content_hash
    assert after.world_fingerprint == before.world_fingerprint


@SLOW
@given(st.sampled_from(CASES), st.integers(min_value=0, max_value=2**53 - 1))
def test_seed_moves_world_fingerprint_and_content_hash(case: str, seed: int) -> None:
    doc = raw(case)
    assume(seed != doc["seed"])
    doc["seed"] = seed
    before, after = parse(raw(case)), parse(doc)
    assert after.world_fingerprint != before.world_fingerprint
    assert after.content_hash != before.content_hash
    assert after.checks_hash == before.checks_hash


def test_world_change_moves_the_fingerprint() -> None:
    doc = raw("backup-running")
    doc["world"]["hosts"][0]["disks"][0]["files"][1]["size_gb"] += 1
    before, after = parse(raw("backup-running")), parse(doc)
    assert after.world_fingerprint != before.world_fingerprint
    assert after.content_hash != before.content_hash


# ---- the forge suite as data ---------------------------------------------------------------

def test_the_five_forge_cases_are_distinct_frozen_and_gated() -> None:
    assert len(CASES) == 5
    loaded = [load_scenario(FORGE / f"{c}.yaml", get_kit) for c in CASES]
    assert [s.id for s in loaded] == [f"forge-{c}" for c in CASES]
    assert len({s.content_hash for s in loaded}) == 5
    assert len({s.checks_hash for s in loaded}) == 5
    assert len({s.world_fingerprint for s in loaded}) == 5
    assert len({s.id for s in loaded}) == 5
    for s in loaded:
        assert any(c.safety for c in s.scenario.checks), s.id
        assert s.scenario.frozen_on is not None, s.id
        assert dt.date.fromisoformat(s.scenario.frozen_on).isoformat() == s.scenario.frozen_on
        assert sum(c.weight for c in s.scenario.checks) == 100
