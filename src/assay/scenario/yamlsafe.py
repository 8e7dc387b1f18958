"""Safe YAML loading for documents: `safe_load` semantics, plus the refusals a strict spec needs.

- size-capped (a document is prose and a small world, not a data dump);
- aliases and anchors refused (no billion-laughs, no shared mutable nodes);
- duplicate mapping keys refused (a repeated key must not silently win);
- YAML 1.1 implicit typing narrowed: only `true`/`false` are booleans and dates stay strings,
  so `language: no` or `frozen_on: 2026-01-05` never change type behind the author's back.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from assay.errors import BadInput

MAX_DOCUMENT_BYTES = 256 * 1024


_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when present: same rules, faster


class _StrictSafeLoader(_Base):  # type: ignore[misc, valid-type]
    """Safe loading with narrowed implicit resolvers and refusal of duplicate keys.

    (Aliases and anchors are refused before composing, in `_refuse_aliases`.)
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[str, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                raise _Refused(f"mapping keys must be strings, got {key!r}", key_node.start_mark)
            if key in seen:
                raise _Refused(f"duplicate key '{key}'", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _Refused(yaml.YAMLError):
    def __init__(self, problem: str, mark: yaml.Mark) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


def _refuse_aliases(text: str) -> None:
    """Walk the parse events: an alias or an anchor anywhere refuses the document."""
    for event in yaml.parse(text, Loader=_Base):
        if isinstance(event, yaml.AliasEvent):
            raise _Refused("aliases are not allowed", event.start_mark)
        if getattr(event, "anchor", None) is not None:
            raise _Refused("anchors are not allowed", event.start_mark)


_NARROWED = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}

# Rebuild the implicit resolvers: drop timestamps, and accept only true/false as booleans.
_StrictSafeLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _NARROWED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf")
)
# YAML 1.2 core numbers: no sexagesimal `22:30` → 1350, no `0b`/octal surprises, no `_` digits.
_StrictSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"), list("-+0123456789")
)
_StrictSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:\.[0-9]+(?:[eE][-+]?[0-9]+)?|[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+.0123456789"),
)


def load_yaml_text(text: str, where: str) -> Any:
    """Parse one YAML document; any problem becomes one `BadInput` line naming `where`."""
    if len(text.encode("utf-8")) > MAX_DOCUMENT_BYTES:
        raise BadInput(f"document is larger than {MAX_DOCUMENT_BYTES // 1024} KiB", where)
    try:
        _refuse_aliases(text)
        return yaml.load(text, Loader=_StrictSafeLoader)  # noqa: S506 - a safe loader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise BadInput(f"not valid YAML: {problem}{at}", where) from None


def load_yaml_file(path: str | Path) -> Any:
    """Read and parse a YAML file, refusing missing, oversized or non-UTF-8 files with one line."""
    p = Path(path)
    if not p.is_file():
        raise BadInput("no such file", str(path))
    if p.stat().st_size > MAX_DOCUMENT_BYTES:
        raise BadInput(f"document is larger than {MAX_DOCUMENT_BYTES // 1024} KiB", str(path))
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise BadInput("not UTF-8 text", str(path)) from None
    return load_yaml_text(text, str(path))
