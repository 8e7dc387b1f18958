"""The cost arithmetic and the validation of self-reported usage, as properties (pure: no store)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.records import MAX_REPORTED_TOKENS, Usage, reported_usage, usage_of_completion
from assay.stats.cost import Price, pareto_front, price_at, row_cost, summarise

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
counts = st.integers(min_value=0, max_value=10**7)
rates = st.floats(min_value=0, max_value=1000, allow_nan=False, allow_infinity=False)


@st.composite
def rows(draw: Any) -> dict[str, Any]:
    prompt = draw(counts)
    return {"role": draw(st.sampled_from(["agent", "judge", "facilitator"])), "model": draw(st.sampled_from("abc")),
            "prompt_tokens": prompt, "completion_tokens": draw(counts),
            "cached_tokens": draw(st.integers(min_value=0, max_value=prompt)), "calls": draw(st.integers(1, 50)),
            "latency_ms": draw(counts), "self_reported": draw(st.booleans()),
            "created_at": T0 + timedelta(minutes=draw(st.integers(0, 100)))}


@settings(max_examples=200, deadline=None)
@given(st.lists(rows(), max_size=30), rates, rates, st.one_of(st.none(), rates))
def test_the_total_is_the_sum_over_rows_of_tokens_times_prices(found: list[dict[str, Any]], p: float, c: float,
                                                                cached: float | None) -> None:
    table = {m: [Price(p, c, cached, T0)] for m in "abc"}
    block = summarise(found, table)
    expected = sum(((r["prompt_tokens"] - r["cached_tokens"]) * p
                    + r["cached_tokens"] * (p if cached is None else cached) + r["completion_tokens"] * c) / 1e6
                   for r in found)
    assert block["total"]["cost_usd"] == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert block["total"]["prompt_tokens"] == sum(r["prompt_tokens"] for r in found)
    assert block["total"]["calls"] == sum(r["calls"] for r in found)
    roles = [block[role]["cost_usd"] for role in ("agent", "judge", "facilitator")]
    assert sum(roles) == pytest.approx(block["total"]["cost_usd"], rel=1e-9, abs=1e-9)
    assert block["total"]["self_reported"] == any(r["self_reported"] for r in found)


@settings(max_examples=100, deadline=None)
@given(st.lists(rows(), min_size=1, max_size=20))
def test_usage_of_a_model_without_a_price_in_force_has_no_cost_and_says_why(found: list[dict[str, Any]]) -> None:
    later = T0 + timedelta(days=1)  # set after every row was recorded: it prices none of them
    block = summarise(found, {m: [Price(1.0, 1.0, None, later)] for m in "abc"})
    assert block["total"]["cost_usd"] is None
    for model in {r["model"] for r in found}:
        assert f"no price for model {model}" in block["total"]["cost_reason"]


def test_a_row_is_priced_at_the_price_in_force_when_it_was_recorded() -> None:
    prices = {"m": [Price(1.0, 2.0, None, T0), Price(10.0, 20.0, None, T0 + timedelta(hours=1))]}
    row = {"prompt_tokens": 1_000_000, "completion_tokens": 1_000_000, "cached_tokens": 0}
    early = price_at(prices, "m", T0 + timedelta(minutes=30))
    late = price_at(prices, "m", T0 + timedelta(hours=2))
    assert early is not None and late is not None
    assert (row_cost(row, early), row_cost(row, late)) == (3.0, 30.0)
    assert price_at(prices, "m", T0 - timedelta(seconds=1)) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10, allow_nan=False), st.floats(0, 1, allow_nan=False)), max_size=12))
def test_the_pareto_front_is_exactly_the_undominated_points(points: list[tuple[float, float]]) -> None:
    front = set(pareto_front(points))
    for i, (c, s) in enumerate(points):
        beaten = any(c2 <= c and s2 >= s and (c2 < c or s2 > s) for c2, s2 in points)
        assert (i in front) == (not beaten)
    if points:
        assert front  # a non-empty set always has an undominated point


valid_entry = st.fixed_dictionaries(
    {"model": st.text(min_size=1, max_size=40).filter(lambda t: t.strip() != ""),
     "prompt_tokens": st.integers(0, MAX_REPORTED_TOKENS), "completion_tokens": st.integers(0, MAX_REPORTED_TOKENS)},
    optional={"calls": st.integers(0, 10_000), "latency_ms": st.integers(0, 86_400_000)})


@settings(max_examples=200, deadline=None)
@given(st.one_of(valid_entry, st.lists(valid_entry, min_size=1, max_size=16)))
def test_a_valid_report_is_read_as_sent(raw: Any) -> None:
    read = reported_usage(raw, default_latency_ms=7)
    entries = raw if isinstance(raw, list) else [raw]
    assert [(u.prompt_tokens, u.completion_tokens, u.calls) for u in read] == [
        (e["prompt_tokens"], e["completion_tokens"], e.get("calls", 1)) for e in entries]
    assert all(u.latency_ms == e.get("latency_ms", 7) for u, e in zip(read, entries))


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.fixed_dictionaries({"model": st.just("m"), "completion_tokens": st.just(1),
                           "prompt_tokens": st.one_of(st.integers(max_value=-1), st.integers(min_value=MAX_REPORTED_TOKENS + 1),
                                                      st.floats(), st.text(), st.booleans(), st.none())}),
    st.fixed_dictionaries({"model": st.one_of(st.just(""), st.just("   "), st.integers(), st.text(min_size=201)),
                           "prompt_tokens": st.just(1), "completion_tokens": st.just(1)}),
    st.fixed_dictionaries({"model": st.just("m"), "prompt_tokens": st.just(1), "completion_tokens": st.just(1),
                           "cached_tokens": st.integers(min_value=2, max_value=100)}),
    st.fixed_dictionaries({"model": st.just("m"), "prompt_tokens": st.just(1), "completion_tokens": st.just(1),
                           "cost": st.integers()}),
    st.lists(st.just({"model": "m", "prompt_tokens": 1, "completion_tokens": 1}), min_size=17, max_size=20),
    st.just([]), st.integers(), st.text(), st.none(),
))
def test_a_bad_report_is_refused_whole(raw: Any) -> None:
    with pytest.raises(ValueError):
        reported_usage(raw)


def test_a_completion_without_usage_counts_the_call_with_no_tokens() -> None:
    assert usage_of_completion({"choices": []}, "m", 5) == Usage("m", 0, 0, 0, 1, 5)
    assert usage_of_completion({"usage": {"prompt_tokens": -3, "completion_tokens": True}}, "m", 0) == Usage("m")
