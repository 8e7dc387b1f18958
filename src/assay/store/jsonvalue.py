"""The one JSON encoding the store writes, identical in what it accepts on every backend.

Kept in its own module so the engine (which serialises every JSON column with `dumps`) and the
Store (which, when a write is refused, names the run and field at fault) agree exactly. The code is
the leaf `assay.jsontext`, so a process that plays runs can encode them as the store would.
"""

from __future__ import annotations

from assay.jsontext import Encoded, dumps

__all__ = ["Encoded", "dumps"]
