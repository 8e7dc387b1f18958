"""Tokens into money: the cost of recorded model usage at the prices in force when it was recorded.

Pure arithmetic over plain rows. A usage row is `{role, model, prompt_tokens, completion_tokens,
cached_tokens, calls, latency_ms, self_reported, created_at}` (`run_usage`); a price is USD per
million tokens for prompt, completion and (optionally) cached prompt tokens, with the moment it
was set. A row is priced by the latest price of its model set at or before the row was recorded, so
a later price change never rewrites what a past run cost. The prompt tokens include the cached ones
(as the OpenAI API counts them): the cached part is charged at the cached price when one is set,
else at the prompt price.

A cost is never guessed: usage of a model with no price in force is *unpriced*, and any sum that
includes it has no cost (None) and says why (`no price for model X`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

ROLES: tuple[str, ...] = ("agent", "judge", "facilitator")
COUNTS: tuple[str, ...] = ("prompt_tokens", "completion_tokens", "cached_tokens", "calls", "latency_ms")
PER = 1_000_000
#: Costs are rounded to this many decimal places of a dollar (a millionth of a cent), so that sums
#: made in another order print the same.
PLACES = 10


@dataclass(frozen=True)
class Price:
    """USD per million tokens, set at `since`."""

    prompt: float
    completion: float
    cached: float | None = None
    since: datetime | None = None


Prices = Mapping[str, Sequence[Price]]
"""{model: its prices, oldest first}."""


def price_at(prices: Prices, model: str, at: datetime | None) -> Price | None:
    """The price of `model` in force at `at` (the latest set at or before it), or None."""
    found: Price | None = None
    for price in prices.get(model, ()):
        if at is None or price.since is None or price.since <= at:
            found = price
    return found


def row_cost(row: Mapping[str, Any], price: Price) -> float:
    """The cost in USD of one usage row at `price`."""
    cached = min(int(row["cached_tokens"]), int(row["prompt_tokens"]))
    fresh = int(row["prompt_tokens"]) - cached
    cached_rate = price.cached if price.cached is not None else price.prompt
    return (fresh * price.prompt + cached * cached_rate + int(row["completion_tokens"]) * price.completion) / PER


def _blank() -> dict[str, Any]:
    return {**{c: 0 for c in COUNTS}, "self_reported": False, "models": [], "cost_usd": 0.0, "cost_reason": None}


def _add(block: dict[str, Any], row: Mapping[str, Any], cost: float | None, unpriced: set[str]) -> None:
    for c in COUNTS:
        block[c] += int(row[c])
    block["self_reported"] = block["self_reported"] or bool(row["self_reported"])
    if row["model"] not in block["models"]:
        block["models"].append(row["model"])
    if cost is None:
        unpriced.add(str(row["model"]))
    elif block["cost_usd"] is not None:
        block["cost_usd"] += cost


def _settle(block: dict[str, Any], unpriced: set[str]) -> dict[str, Any]:
    block["models"] = sorted(block["models"])
    if unpriced:
        block["cost_usd"] = None
        block["cost_reason"] = "; ".join(f"no price for model {m}" for m in sorted(unpriced))
    else:
        block["cost_usd"] = round(block["cost_usd"], PLACES)
    return block


def summarise(rows: Iterable[Mapping[str, Any]], prices: Prices) -> dict[str, Any]:
    """Usage and cost by role and in total: `{agent, judge, facilitator, total}`, each `{prompt_tokens,
    completion_tokens, cached_tokens, calls, latency_ms, self_reported (any row was), models,
    cost_usd (None when any of its usage is unpriced), cost_reason}`."""
    blocks = {role: _blank() for role in (*ROLES, "total")}
    unpriced: dict[str, set[str]] = {role: set() for role in blocks}
    for row in rows:
        price = price_at(prices, str(row["model"]), row.get("created_at"))
        cost = None if price is None else row_cost(row, price)
        role = str(row["role"]) if row["role"] in ROLES else "agent"
        _add(blocks[role], row, cost, unpriced[role])
        _add(blocks["total"], row, cost, unpriced["total"])
    return {role: _settle(block, unpriced[role]) for role, block in blocks.items()}


def per_run(total: Mapping[str, Any], runs: int) -> float | None:
    """A total cost spread over `runs` runs (None when the total has none, or there are no runs)."""
    cost = total.get("cost_usd")
    if cost is None or runs <= 0:
        return None
    return round(float(cost) / runs, PLACES)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """The indices of the points (cost, score) no other point beats: none is at most as costly
    and at least as good, and better in one of the two. Lower cost and higher score are better."""
    front = []
    for i, (cost, score) in enumerate(points):
        dominated = any((c <= cost and s >= score) and (c < cost or s > score)
                        for j, (c, s) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return front
