"""`assay config get|set|price` and `assay era add|list`: platform config (keyed JSON values with
history, model prices) and measurement eras.

`assay.cli.lazy` calls `register(app)` when one of its commands is named. Every command takes
`--db URL` like the rest of the CLI, and follows its error contract: a refusal is a `BadInput`
(one stderr line, exit 2) raised before anything is written.
"""

from __future__ import annotations

from assay.service.actors import OPERATOR

from typing import Optional

import typer

from assay.cli.ui import AlwaysJson, DbOpt, JsonFlag, open_store_at, out, print_json
from assay.errors import BadInput

config_app = typer.Typer(no_args_is_help=True, help="Platform config: keyed JSON values with history.")
era_app = typer.Typer(no_args_is_help=True, help="Measurement eras: versions of the measurement stack.")


@config_app.command("get")
def config_get(key: Optional[str] = typer.Argument(None, help="Config key (default: every known key)."),
               as_json: bool = AlwaysJson, db: Optional[str] = DbOpt) -> None:
    """Print the value in force (defaults filled in) and its history, as JSON."""
    from assay.service import platform_config

    store = open_store_at(db)
    if key is None:
        print_json({k: platform_config.get(store, k) for k in platform_config.KNOWN_KEYS})
        return
    print_json(platform_config.describe(store, key))


@config_app.command("set")
def config_set(key: str = typer.Argument(..., help="Config key."),
               value: str = typer.Argument(..., help="The new value, a JSON object."),
               as_json: bool = AlwaysJson, db: Optional[str] = DbOpt) -> None:
    """Append a new value for KEY (the old ones stay in its history)."""
    from assay.service import platform_config

    parsed = platform_config.parse_json_value(value, key)
    platform_config.validate_value(key, parsed)
    print_json({"key": key, "value": platform_config.set_value(open_store_at(db), key, parsed, actor=OPERATOR)})


@config_app.command("price")
def config_price(model: Optional[str] = typer.Argument(None, help="Model name as agents and judges name it "
                                                                  "(default: list every priced model)."),
                 prompt: Optional[float] = typer.Option(None, "--prompt", help="USD per million prompt tokens."),
                 completion: Optional[float] = typer.Option(None, "--completion",
                                                            help="USD per million completion tokens."),
                 cached: Optional[float] = typer.Option(None, "--cached", help="USD per million cached prompt "
                                                        "tokens (default: the prompt price)."),
                 as_json: bool = AlwaysJson, db: Optional[str] = DbOpt) -> None:
    """Set a model's price (appended: usage recorded earlier keeps the price of its time), or show it.

    With --prompt and --completion, append a price for MODEL; with neither, print its price and
    history; with no MODEL, every priced model and its price in force."""
    from assay.service import usage

    store = open_store_at(db)
    if model is None:
        print_json({"prices": usage.price_table(store)})
        return
    if prompt is None and completion is None and cached is None:
        print_json(usage.describe_price(store, model))
        return
    if prompt is None or completion is None:
        raise BadInput("a price needs both --prompt and --completion (USD per million tokens)", where="--prompt")
    print_json(usage.set_price(store, model, prompt=prompt, completion=completion, cached=cached, actor=OPERATOR))


@era_app.command("add")
def era_add(name: str = typer.Argument(..., help="Era name, e.g. 2026-06-scoring-fix."),
            starts: str = typer.Option(..., "--from", help="ISO 8601 start (a date means 00:00 UTC)."),
            reason: str = typer.Option(..., "--reason", help="What changed in the measurement stack."),
            as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """Add a measurement-era boundary; submissions created from then on are stamped with it."""
    from assay.service import platform_config

    era = platform_config.add_era(open_store_at(db), name, starts, reason, actor=OPERATOR)
    if as_json:
        print_json(era)
        return
    out.print(f"era {era['name']} from {era['from']}", markup=False)


@era_app.command("list")
def era_list(as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """The era boundaries, oldest first, marking the current one."""
    from assay.service import platform_config

    rows = platform_config.eras(open_store_at(db))
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no measurement eras defined")
    for e in rows:
        out.print(f"{'*' if e['current'] else ' '} {e['name']}  from {e['from']}  {e['reason']}", markup=False)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
    app.add_typer(era_app, name="era")
