"""JSON columns hand back exactly what was stored: same values, same types, on both backends.

PostgreSQL keeps JSONB numbers as `numeric`, which prints a float of magnitude >= 1e16 without
a decimal point (so it reads back as an int), and JSONB cannot hold the NUL character; the
generated values stay inside what both backends can store exactly, and the store refuses
NUL, NaN and Infinity on both so a run never stores on one backend and fails on the other.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.errors import BadInput
from assay.store import Store
from assay.store.runs_repo import RunsRepo
from assay.store.rows import NewBatch

from ._factories import CHECKS, scored, batch_row, plan, record, scenario


def same(a: Any, b: Any) -> bool:
    """Equal *and* of the same JSON type all the way down (True == 1 in Python; not here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


# codec="utf-8" leaves out lone surrogates (which no encoded text can hold).
KEYS = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8)


def json_values(postgres: bool) -> st.SearchStrategy[Any]:
    text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
    bound = 1e15 if postgres else None
    floats = st.floats(
        min_value=-bound if bound else None, max_value=bound, allow_nan=False, allow_infinity=False
    )
    scalars = st.none() | st.booleans() | st.integers() | floats | text
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
        max_leaves=25,
    )


def _store_one(store: Store, final_state: dict[str, Any], transcript: list[Any],
               actions: list[Any], document: dict[str, Any]) -> tuple[str, str]:
    kwargs = scenario(body=repr(document)[:200] + str(id(document)), document=document)
    RunsRepo(store).add_scenario_version(**kwargs)
    [slot] = plan(kwargs["content_hash"], n=1)
    RunsRepo(store).add_batch(NewBatch(**batch_row()), [slot])
    rec = record(slot, final_state=final_state, transcript=transcript, actions=actions)
    RunsRepo(store).add_runs([scored(rec, CHECKS)])
    return slot.run_id, kwargs["content_hash"]


def test_json_round_trip_is_exact(store: Store) -> None:
    postgres = store.dialect == "postgresql"

    @settings(max_examples=30, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(
        final_state=st.dictionaries(KEYS,
                                    json_values(postgres), max_size=5),
        transcript=st.lists(json_values(postgres), max_size=4),
        document=st.dictionaries(KEYS,
                                 json_values(postgres), max_size=5),
    )
    def check(final_state: dict[str, Any], transcript: list[Any], document: dict[str, Any]) -> None:
        actions = [{"tool": "write", "arguments": final_state}]
        run_id, content_hash = _store_one(store, final_state, transcript, actions, document)
        got = RunsRepo(store).run(run_id)
        assert got is not None
        assert same(got.final_state, final_state)
        assert same(got.transcript, transcript)
        assert same(got.actions, actions)
        assert got.scenario is not None and same(got.scenario.document, document)
        assert same(RunsRepo(store).scenario_by_hash(content_hash).document, document)  # type: ignore[union-attr]

    check()


def test_awkward_but_storable_values_round_trip(store: Store) -> None:
    state = {
        "unicode": "naïve 漢字 🙂 \u200b",
        "escapes": 'quote " backslash \\ newline \n tab \t \u0001',
        "big_int": 2**70,
        "neg": -(2**63),
        "float": 0.1,
        "tiny": 5e-324,
        "whole_float": 3.0,
        "bools": [True, False, None],
        "empty": {"list": [], "dict": {}, "str": ""},
        "": "empty key",
    }
    transcript: list[Any] = [{"role": "assistant", "content": None, "tool_calls": []}]
    run_id, _ = _store_one(store, state, transcript, [], {"nested": [[[{}]]]})
    got = RunsRepo(store).run(run_id)
    assert got is not None
    assert same(got.final_state, state) and same(got.transcript, transcript)


@pytest.mark.parametrize(
    "bad",
    [{"x": float("nan")}, {"x": float("inf")}, {"x": "nul \x00 inside"}, {"k\x00": 1},
     {"x": ["lone \ud800 surrogate"]}],
    ids=["nan", "inf", "nul-value", "nul-key", "surrogate"],
)
def test_values_no_backend_can_store_exactly_are_refused_on_both(
    store: Store, bad: dict[str, Any]
) -> None:
    kwargs = scenario()
    RunsRepo(store).add_scenario_version(**kwargs)
    [slot] = plan(kwargs["content_hash"], n=1)
    RunsRepo(store).add_batch(NewBatch(**batch_row()), [slot])
    with pytest.raises(BadInput, match=f"run {slot.run_id}: final_state is not storable JSON"):
        RunsRepo(store).add_runs([scored(record(slot, final_state=bad), CHECKS)])
    assert RunsRepo(store).run(slot.run_id).status is None  # type: ignore[union-attr]
    with pytest.raises(BadInput, match="document is not storable JSON"):
        RunsRepo(store).add_scenario_version(**scenario(body="bad", document=bad))
    assert RunsRepo(store).latest_scenarios()[0].content_hash == kwargs["content_hash"]


def test_record_dataclass_round_trip(store: Store) -> None:
    kwargs = scenario()
    RunsRepo(store).add_scenario_version(**kwargs)
    [slot] = plan(kwargs["content_hash"], n=1)
    RunsRepo(store).add_batch(NewBatch(**batch_row()), [slot])
    rec = record(slot)
    RunsRepo(store).add_runs([scored(rec, CHECKS)])
    got = RunsRepo(store).run(slot.run_id)
    assert got is not None
    for name in type(rec).model_fields:
        if name == "usage":  # kept in run_usage, a row per (role, model): tests/usage
            continue
        assert same(getattr(got, name), getattr(rec, name)), name


def test_pre_encoded_final_state_is_stored_as_given(store: Store) -> None:
    import json

    kwargs = scenario()
    RunsRepo(store).add_scenario_version(**kwargs)
    [slot] = plan(kwargs["content_hash"], n=1)
    RunsRepo(store).add_batch(NewBatch(**batch_row()), [slot])
    rec = record(slot, final_state={"ignored": True}).with_final_state_text(
        json.dumps({"b": 1, "a": ["é"]}, separators=(",", ":"), ensure_ascii=False))
    RunsRepo(store).add_runs([scored(rec, CHECKS)])
    got = RunsRepo(store).run(slot.run_id)
    assert got is not None and got.final_state == {"b": 1, "a": ["é"]}


ANY_TEXT = st.text(max_size=12)  # lone surrogates and NUL too: the encoder escapes or keeps them, as json does
ANY_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(
        ANY_TEXT | st.integers() | st.booleans() | st.none(), inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(ANY_VALUE, st.booleans(), st.booleans(), st.booleans(), st.sampled_from([(", ", ": "), (",", ":")]))
def test_a_prebuilt_encoder_writes_what_json_writes(value: Any, ascii_only: bool, sort_keys: bool,
                                                    allow_nan: bool, separators: tuple[str, str]) -> None:
    """`jsontext.encoder` (its C encoder built once) is `json.JSONEncoder(...).encode`, text for
    text, and refuses what it refuses (NaN without allow_nan; keys it cannot sort)."""
    import json

    from assay.jsontext import encoder

    options = {"ensure_ascii": ascii_only, "sort_keys": sort_keys, "allow_nan": allow_nan, "separators": separators}
    try:
        expected: Any = json.JSONEncoder(**options).encode(value)
    except (ValueError, TypeError) as exc:
        expected = type(exc)
    try:
        got: Any = encoder(**options)(value)
    except (ValueError, TypeError) as exc:
        got = type(exc)
    assert got == expected
