"""What every kit's state model shares: strict models, and how a mapping of data keys is marked.

A kit's state model is the shape its `materialise` builds and its world mutates (the document
checks are evaluated against). Fields are the model's; the keys of a *keyed* mapping are data (host
names, ticket ids, file names) and are marked with `keyed(...)`, which says what a key names (shown
in the reference and in refusals) and whether a run may add keys to it:

- `"fixed"`: the keys are the initial state's, and no action adds or removes one;
- `"shrinks"`: the keys are the initial state's, and an action may remove one (a killed process);
- `"grows"`: an action may add keys, so a check may name one the initial state does not have.

`scenario.shape` reads these marks from the JSON Schema (`x-key`, `x-keys`), so a check path's data
key must exist in the initial state unless its mapping grows.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Keys = Literal["fixed", "shrinks", "grows"]


class StateModel(BaseModel):
    """A section of a kit's state: strict (no coercion), and no field the model does not name."""

    model_config = ConfigDict(strict=True, extra="forbid")


def keyed(key: str, description: str, keys: Keys = "fixed", **constraints: Any) -> Any:
    """A field holding a mapping whose keys are data: `key` says what one names (e.g. "host")."""
    return Field(description=description, json_schema_extra={"x-key": key, "x-keys": keys}, **constraints)


def field(description: str, **constraints: Any) -> Any:
    """A described field (the description is the state reference's line for it)."""
    return Field(description=description, **constraints)
