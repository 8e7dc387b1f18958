"""Tokens and cost: the price table, the usage of runs, batches and submissions, and the spend cap.

Usage rows (`run_usage`) are appended with each run (the agent's), each model judge pass (the
judge's) and each model-facilitated run (the facilitator's). Prices are platform config rows under
`price/MODEL` (USD per million prompt, completion and cached prompt tokens), appended, never
edited: a row is costed at the price in force when it was recorded (`stats.cost`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NotRequired, TypedDict, cast

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from assay.errors import Invalid
from assay.jsontypes import JsonObject, JsonValue
from assay.records import MAX_MODEL_NAME, Usage
from assay.scenario.load import describe_error
from assay.service.actors import Actor, require_staff
from assay.stats.cost import Price, Prices, per_run, summarise
from assay.store.db import Store
from assay.store.usage_repo import NewUsageRow, UsageRepo, UsageRow

PRICE_PREFIX = "price/"
#: The most a price may be, USD per million tokens (a bound that refuses a typo of many zeros).
MAX_PRICE = 100_000.0


class PriceValue(BaseModel):
    """A model's price, USD per million tokens; `cached` is the price of cached prompt tokens
    (absent: they cost the prompt price)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    prompt: StrictFloat | StrictInt = Field(ge=0, le=MAX_PRICE)
    completion: StrictFloat | StrictInt = Field(ge=0, le=MAX_PRICE)
    cached: StrictFloat | StrictInt | None = Field(default=None, ge=0, le=MAX_PRICE)


# What `assay price` prints, as it is (TypedDicts: these keys, in this order).


class PriceEntry(TypedDict):
    """A price as set (`cached` only where one was given) and when."""

    prompt: float
    completion: float
    cached: NotRequired[float]
    set_at: str


class PriceDescription(TypedDict):
    model: str
    price: PriceEntry | None  # the one in force now
    history: list[PriceEntry]


class PricedModel(TypedDict):
    model: str
    prompt: float
    completion: float
    cached: float | None
    set_at: str | None


def _checked_model(model: str) -> str:
    name = model.strip()
    if not name or len(name) > MAX_MODEL_NAME or any(ch.isspace() or ord(ch) < 32 for ch in name):
        raise Invalid(f"a model name is 1 to {MAX_MODEL_NAME} characters without spaces", "model", value=model)
    return name


def set_price(store: Store, model: str, *, prompt: float, completion: float, cached: float | None = None,
              actor: Actor) -> PriceDescription:
    """Append a price for `model` (its earlier prices stay in its history and keep pricing what
    was recorded under them)."""
    require_staff(actor, "set a model price", "model")
    name = _checked_model(model)
    try:
        value = PriceValue.model_validate({"prompt": prompt, "completion": completion, "cached": cached})
    except ValidationError as exc:
        raise Invalid(describe_error(exc), "price", value=name) from None
    clean = {k: float(v) for k, v in value.model_dump().items() if v is not None}
    UsageRepo(store).add_config(PRICE_PREFIX + name, clean)
    return describe_price(store, name)


def _object(value: JsonValue) -> JsonObject:
    """A stored price: an object, as `set_price` wrote it."""
    assert isinstance(value, dict)
    return value


def describe_price(store: Store, model: str) -> PriceDescription:
    """`{model, price (in force now, or None), history [{prompt, completion, cached?, set_at}]}`."""
    name = _checked_model(model)
    history = UsageRepo(store).config_history(PRICE_PREFIX + name)
    # the stored value's own keys in its own order (as its backend keeps them), then when it was set
    rows = [cast(PriceEntry, {**_object(h.value), "set_at": h.created_at.isoformat()}) for h in history]
    return {"model": name, "price": rows[-1] if rows else None, "history": rows}


def prices(store: Store) -> dict[str, list[Price]]:
    """Every model's prices, oldest first."""
    out: dict[str, list[Price]] = {}
    for row in UsageRepo(store).price_rows(PRICE_PREFIX):
        value = PriceValue.model_validate(row.value)  # as `set_price` wrote it: never refused here
        out.setdefault(row.key[len(PRICE_PREFIX):], []).append(
            Price(float(value.prompt), float(value.completion), None if value.cached is None else float(value.cached),
                  row.created_at))
    return out


def price_table(store: Store) -> list[PricedModel]:
    """Every priced model with the price in force now."""
    return [{"model": m, "prompt": p[-1].prompt, "completion": p[-1].completion, "cached": p[-1].cached,
             "set_at": p[-1].since.isoformat() if p[-1].since else None} for m, p in sorted(prices(store).items())]


# -- recording ---------------------------------------------------------------------------------


def record_usage(store: Store, run_id: str, role: str, usage: Usage | None, *, self_reported: bool = False) -> None:
    """Append one usage row for a run (a judge pass's, a facilitator's); nothing when there is none."""
    if usage is None or usage.calls <= 0:
        return
    UsageRepo(store).add([{"run_id": run_id, "role": role, "model": usage.model, "prompt_tokens": usage.prompt_tokens,
                           "completion_tokens": usage.completion_tokens, "cached_tokens": usage.cached_tokens,
                           "calls": usage.calls, "latency_ms": usage.latency_ms, "self_reported": self_reported}])


# -- reading -----------------------------------------------------------------------------------


def summary(rows: Iterable[UsageRow], table: Prices, runs: int) -> dict[str, Any]:
    """A usage block: by role and in total, with the cost per run over `runs` planned runs."""
    block = summarise(rows, table)
    block["runs"] = runs
    block["cost_per_run_usd"] = per_run(block["total"], runs)
    return block


def batch_usage(store: Store, batch_id: str, run_ids: list[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The batch's usage block and each run's (by run id), costed at the prices of their time.
    Every run without usage (a scripted agent's: all of them) gets the one block that says so,
    made once and shared: read it, never change it."""
    rows = UsageRepo(store).for_batch(batch_id)
    table = prices(store)
    by_run: dict[str, list[UsageRow]] = {r: [] for r in run_ids}
    for row in rows:
        by_run.setdefault(row["run_id"], []).append(row)
    unused = summarise((), table)
    return summary(rows, table, len(run_ids)), {r: summarise(found, table) if found else unused
                                                 for r, found in by_run.items()}


def batch_spend(store: Store, batch_id: str) -> tuple[float, list[str]]:
    """What a batch has spent so far (USD, priced usage only) and the models it used that have no price."""
    block = summarise(UsageRepo(store).for_batch(batch_id), prices(store))
    total = block["total"]
    unpriced = [] if total["cost_reason"] is None else [
        m for m in total["models"] if f"no price for model {m}" in total["cost_reason"]]
    if total["cost_usd"] is not None:
        return float(total["cost_usd"]), unpriced
    priced_rows = [r for r in UsageRepo(store).for_batch(batch_id) if r["model"] not in unpriced]
    return float(summarise(priced_rows, prices(store))["total"]["cost_usd"] or 0.0), unpriced


# -- the spend cap -----------------------------------------------------------------------------


class Budget:
    """`--max-cost USD`: stop starting runs once the next would push the batch's spend past `cap`.

    The spend is what the batch's recorded usage costs (read from the store when the batch
    resumes) plus each run's as the executor hands it over; the next run is expected to cost the
    mean of the runs counted so far (nothing before the first, so one run always starts), and so
    are the runs still in flight. Before the first run ends nothing is known: each of the first
    `--workers` runs starts, so the cap holds within one run's cost with one worker and within the
    runs in flight with more. Usage of
    a model with no price cannot be counted: the first such run stops the batch (`stopped` says
    why). Runs that ended stay recorded; the rest stay pending, for `assay resume`."""

    def __init__(self, store: Store, batch_id: str, cap: float) -> None:
        if not cap >= 0:
            raise Invalid("must be a number of US dollars, 0 or more", "max_cost", value=str(cap))
        self.cap = float(cap)
        self.table = prices(store)
        rows = UsageRepo(store).for_batch(batch_id)
        total = summarise(rows, self.table)["total"]
        self.spent = float(total["cost_usd"] or 0.0)
        self.stopped: str | None = total["cost_reason"]
        self.runs = len({r["run_id"] for r in rows})
        self.started = self.counted = 0

    def count(self, usage_rows: list[NewUsageRow]) -> None:
        """Add a run's usage (its record's rows, costed at the prices in force now)."""
        total = summarise(usage_rows, self.table)["total"]
        if total["cost_reason"] is not None:
            self.stopped = self.stopped or f"{total['cost_reason']}: --max-cost cannot count its cost"
        self.spent += float(total["cost_usd"] or 0.0)
        self.runs += 1
        self.counted += 1

    def allows_next(self) -> bool:
        if self.stopped is not None:
            return False
        expected = self.spent / self.runs if self.runs else 0.0
        in_flight = max(0, self.started - self.counted)
        if self.spent + expected * (in_flight + 1) > self.cap:
            self.stopped = (f"spent ${self.spent:.6f} of --max-cost ${self.cap:g}"
                            + (f" with {in_flight} runs still in flight" if in_flight else "")
                            + f"; the next run (about ${expected:.6f}) would pass it")
            return False
        self.started += 1
        return True

    def wrap(self, sink: Any) -> Any:
        """The executor's sink, counting each run's usage as it is handed over."""
        def counted(record: Any, steps: int) -> None:
            self.count(list(getattr(record, "usage", None) or []))
            sink(record, steps)

        return counted
