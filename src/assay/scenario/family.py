"""Scenario families: one template and a parameter table, expanded into ordinary scenario documents.

A family document (YAML, loaded by `yamlsafe`, so no tags, anchors or code):

    family: disk-pressure                 # the family's slug
    description: …                        # optional prose
    parameters:                           # every parameter, declared with what it means
      case: the case's short name (goes into its id)
      host: the storage host
    template:                             # a scenario document with ${name} placeholders
      id: forge-disk-${case}
      …
    cases:                                # the table: one row per case, every parameter set
      - {case: minio, host: store-01}

Substitution is the whole language (no expressions, no loops, no conditionals, no code):

- a string that is exactly `${name}` becomes the row's value with its own type (a number, a list
  of hosts, a mapping);
- `${name}` inside a longer string (or a mapping key) is replaced by the value's text (a string,
  an integer or true/false; a list or a mapping there is refused);
- `$${` stands for a literal `${`; nothing else in the template changes, and an inserted value is
  never read for placeholders itself.

Refused, each as one line naming the path: a placeholder naming no declared parameter, a declared
parameter the template never uses, a row that sets an undeclared parameter or misses a declared one,
a template id without a placeholder, and two rows that expand to one id. Expansion is deterministic:
the same family gives the same cases, in the table's order.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.errors import BadInput, Problems
from assay.scenario.load import PATTERN_WORDS
from assay.scenario.models import SLUG
from assay.scenario.yamlsafe import load_yaml_file

#: A parameter's name: a lowercase identifier.
PARAM = r"[a-z_][a-z0-9_]*"
_PLACEHOLDER = re.compile(r"\$\$\{|\$\{(" + PARAM + r")\}")
_WHOLE = re.compile(r"^\$\{(" + PARAM + r")\}$")
_TOP = ("family", "description", "parameters", "template", "cases")


@dataclass(frozen=True)
class Family:
    """A validated family document (the expansion is `expand`)."""

    name: str
    description: str
    parameters: dict[str, str]
    template: dict[str, Any]
    rows: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Expanded:
    """One expanded case: its id, the row it came from (0-based) and its scenario document."""

    id: str
    row: int
    document: dict[str, Any]


def placeholders(node: Any) -> set[str]:
    """Every parameter name a (template) node refers to, in keys and string values alike."""
    found: set[str] = set()
    for _path, text in _strings(node, ""):
        found.update(m.group(1) for m in _PLACEHOLDER.finditer(text) if m.group(1))
    return found


def _strings(node: Any, path: str) -> list[tuple[str, str]]:
    """(path, text) of every string in `node`: mapping keys (at the mapping's path) and values."""
    out: list[tuple[str, str]] = []
    if isinstance(node, str):
        out.append((path, node))
    elif isinstance(node, dict):
        for key, value in node.items():
            out.append((path, key))
            out.extend(_strings(value, _join(path, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.extend(_strings(value, f"{path}[{i}]"))
    return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def parse_family(raw: Any, where: str) -> Family:
    """A family document, validated; every problem is one `BadInput` line naming its path."""
    if not isinstance(raw, dict):
        raise BadInput("a family document must be a mapping at the top level", where)
    problems: list[BadInput] = []

    def problem(path: str, message: str) -> None:
        problems.append(BadInput(f"{path}: {message}" if path else message, where))

    for key in raw:
        if key not in _TOP:
            problem(key, f"unknown field (a family has {', '.join(_TOP)})")
    name = raw.get("family")
    if not isinstance(name, str) or not re.match(SLUG, name):
        problem("family", f"{name!r} is not a family name; {PATTERN_WORDS[SLUG]}")
    description = raw.get("description", "")
    if not isinstance(description, str):
        problem("description", "is text")
        description = ""
    declared = raw.get("parameters")
    parameters: dict[str, str] = {}
    if not isinstance(declared, dict) or not declared:
        problem("parameters", "declares at least one parameter (name: what it means)")
    else:
        for pname, meaning in declared.items():
            if not re.fullmatch(PARAM, pname):
                problem(f"parameters.{pname}", "a parameter's name is a lowercase identifier (a-z, 0-9, _)")
            elif not isinstance(meaning, str) or not meaning.strip():
                problem(f"parameters.{pname}", "say what the parameter means (a line of text)")
            else:
                parameters[pname] = meaning
    template = raw.get("template")
    if not isinstance(template, dict):
        problem("template", "is a scenario document (a mapping) with ${name} placeholders")
        template = {}
    else:
        for path, text in _strings(template, "template"):
            for m in _PLACEHOLDER.finditer(text):
                if m.group(1) and isinstance(declared, dict) and m.group(1) not in declared:
                    problem(path, f"placeholder ${{{m.group(1)}}} names no declared parameter "
                                  f"(declared: {', '.join(sorted(declared))})")
        used = placeholders(template)
        for pname in parameters:
            if pname not in used:
                problem(f"parameters.{pname}", "declared but used nowhere in the template")
        ident = template.get("id")
        if not isinstance(ident, str) or not placeholders(ident):
            problem("template.id", "holds a placeholder (e.g. forge-disk-${case}), so every row gets its own id")
    rows = raw.get("cases")
    if not isinstance(rows, list) or not rows:
        problem("cases", "lists at least one row of parameter values")
        rows = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            problem(f"cases[{i}]", "a row is a mapping of parameter: value")
            continue
        for pname in row:
            if isinstance(declared, dict) and pname not in declared:
                problem(f"cases[{i}].{pname}", f"unknown parameter (declared: {', '.join(sorted(declared))})")
        missing = [p for p in parameters if p not in row]
        if missing:
            problem(f"cases[{i}]", f"sets no value for {', '.join(missing)}")
    if problems:
        raise Problems(problems)
    assert isinstance(name, str)
    return Family(name, description, parameters, template, tuple(rows))


def expand(family: Family, where: str) -> list[Expanded]:
    """One scenario document per row, in the table's order; refused (every problem, one line each)
    when a value cannot be spliced where its placeholder stands or two rows give one id."""
    problems: list[BadInput] = []
    out: list[Expanded] = []
    first: dict[str, int] = {}
    for i, row in enumerate(family.rows):
        try:
            document = substitute(family.template, row, f"cases[{i}]")
        except BadInput as exc:
            problems.append(BadInput(exc.message, where))
            continue
        ident = document.get("id")
        if not isinstance(ident, str):
            problems.append(BadInput(f"cases[{i}]: the id expands to {ident!r}, not text", where))
            continue
        if ident in first:
            problems.append(BadInput(f"cases[{i}]: expands to id '{ident}', already the id of cases[{first[ident]}]; "
                                     "each row needs its own id", where))
            continue
        first[ident] = i
        out.append(Expanded(ident, i, document))
    if problems:
        raise Problems(problems)
    return out


def substitute(node: Any, values: dict[str, Any], row: str, path: str = "template") -> Any:
    """`node` with every placeholder replaced by its value in `values` (see the module's rules)."""
    if isinstance(node, str):
        whole = _WHOLE.match(node)
        if whole:
            return copy.deepcopy(values[whole.group(1)])
        return _splice(node, values, row, path)
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            new_key = _splice(key, values, row, path)
            if new_key in out:
                raise BadInput(f"{row}: {path}: key '{key}' expands to '{new_key}', a key the mapping already has")
            out[new_key] = substitute(value, values, row, _join(path, key))
        return out
    if isinstance(node, list):
        return [substitute(v, values, row, f"{path}[{i}]") for i, v in enumerate(node)]
    return node


def _splice(text: str, values: dict[str, Any], row: str, path: str) -> str:
    def one(m: re.Match[str]) -> str:
        if not m.group(1):
            return "${"  # $${ is a literal ${
        value = values[m.group(1)]
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (str, int)):
            return str(value)
        kind = "list" if isinstance(value, list) else "mapping" if isinstance(value, dict) else type(value).__name__
        raise BadInput(f"{row}: {path}: parameter '{m.group(1)}' is a {kind}; only a placeholder that is the whole "
                       "string can take one")

    return _PLACEHOLDER.sub(one, text)


def load_family(path: str | Path) -> tuple[Family, list[Expanded]]:
    """A family file, validated and expanded (the cases are not yet validated as scenarios)."""
    where = str(path)
    family = parse_family(load_yaml_file(path), where)
    return family, expand(family, where)
