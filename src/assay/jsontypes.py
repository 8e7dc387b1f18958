"""Names for JSON that is free-form by design (a leaf: imports nothing of assay).

Most data has a typed model (store/rows.py, web/schemas.py, records.py). What is left is JSON whose
shape the platform does not own: a world's state, a scenario's document, a stored JSON column as
written by an older version, a results document passed through unchanged. Naming it says so where a
bare `dict[str, Any]` would only say "not typed yet"; a value read from it is `JsonValue` and must be
narrowed (isinstance) before use, which `Any` never asked for.
"""

from __future__ import annotations

from typing import TypeAlias, Union

JsonScalar: TypeAlias = Union[str, int, float, bool, None]
JsonValue: TypeAlias = Union[JsonScalar, list["JsonValue"], dict[str, "JsonValue"]]
JsonObject: TypeAlias = dict[str, JsonValue]
JsonArray: TypeAlias = list[JsonValue]
