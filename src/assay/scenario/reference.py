"""The authoring reference of a kit: its state's shape and its tools, for `assay kit` and the docs.

Built from what the kit publishes (`state_model`, `tools`, `notes`, `summary`), the same model that
`scenario.shape` holds checks to, so the reference and validation cannot disagree. The caller passes
the kits (`assay.worlds.kits.get_kit`): this room does not import `worlds/`.
`docs/state-reference.md` is `markdown(...)` of every kit; a test holds the file to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from assay.scenario.shape import Schema, Shape, describe, is_map, state_schema

REGENERATE = "assay kit --markdown > docs/state-reference.md"

#: What each `x-keys` mark means for a check (see `assay.worlds.contract.keyed`).
KEYS = {
    "fixed": "keys fixed at the start",
    "shrinks": "keys from the start; actions remove some",
    "grows": "actions add keys",
}


class ToolLike(Protocol):
    name: str
    description: str
    effect: str

    def schema(self) -> dict[str, Any]: ...


class KitLike(Protocol):
    """What the reference reads of a kit (`assay.worlds.base.Kit` publishes it)."""

    name: str
    summary: str
    notes: Sequence[str]
    state_model: type[BaseModel]
    tools: Sequence[ToolLike]


def reference(kit: KitLike) -> dict[str, Any]:
    """The machine form (`assay kit NAME --json`): the state's JSON Schema, the same as path rows,
    and the tools with their argument schemas and effects."""
    schema = state_schema(kit.state_model)
    return {
        "kit": kit.name,
        "summary": kit.summary,
        "notes": list(kit.notes),
        "state_schema": schema,
        "paths": state_rows(schema),
        "tools": [{"name": t.name, "description": t.description,
                   "arguments": t.schema()["function"]["parameters"], "effect": t.effect} for t in kit.tools],
    }


def state_rows(schema: Schema) -> list[dict[str, str]]:
    """Every place in the state, in the model's order: `{path, value, about}`. A data key is written
    `<what>` (`hosts.<host>.isolated`), a list's items `[]` (`notifications[].team`, a `where` key)."""
    shape = Shape(schema, {}, "the state")
    rows: list[dict[str, str]] = []
    _walk(shape, schema, "", rows)
    return rows


def _walk(shape: Shape, node: Schema, at: str, rows: list[dict[str, str]]) -> None:
    for alt in shape.alts(node):
        if "properties" in alt:
            for name, sub in alt["properties"].items():
                path = f"{at}.{name}" if at else name
                alts = shape.alts(sub)
                about = " ".join(x for x in (sub.get("description"), _keys(alts)) if x)
                rows.append({"path": path, "value": _value(alts), "about": about})
                _walk(shape, sub, path, rows)
        elif is_map(alt):
            entry, values = f"{at}.<{alt.get('x-key', 'key')}>", alt["additionalProperties"]
            rows.append({"path": entry, "value": _value(shape.alts(values)), "about": ""})
            _walk(shape, values, entry, rows)
        elif alt.get("type") == "array":
            entry, items = f"{at}[]", alt.get("items", {})
            rows.append({"path": entry, "value": _value(shape.alts(items)), "about": ""})
            _walk(shape, items, entry, rows)


def _keys(alts: list[Schema]) -> str:
    return next((f"({KEYS[a.get('x-keys', 'fixed')]})" for a in alts if is_map(a)), "")


def _value(alts: list[Schema]) -> str:
    words = []
    for a in alts:
        if "properties" in a:
            words.append("fields below")
        elif is_map(a):
            words.append(f"mapping (<{a.get('x-key', 'key')}> below)")
        elif a.get("type") == "array":
            words.append("list (items below)")
        else:
            words.append(describe([a]))
    return " or ".join(dict.fromkeys(words))


def arguments(tool: dict[str, Any]) -> str:
    """A tool's arguments in words: `host (string), limit (integer, optional)`."""
    params = tool["arguments"]
    required = set(params.get("required", ()))
    shown = []
    for name, p in params.get("properties", {}).items():
        kind = " | ".join(p["enum"]) if "enum" in p else p.get("type", "any")
        shown.append(f"{name} ({kind}{'' if name in required else ', optional'})")
    return ", ".join(shown) or "none"


# ---- the docs page ---------------------------------------------------------------------------

_INTRO = """\
# The final state: what a check can read

<!-- Generated from the kits' state models and tools; do not edit. Regenerate with:
     {regenerate} -->

A check reads the world's **final state**: one JSON document per run, whose shape each kit
publishes as a typed model (`assay kit NAME` prints it; `assay kit NAME --json` gives its JSON
Schema, the same rows and the tools). `assay validate` holds every check to it before any run.

**Paths.** A path is keys joined by dots: `hosts.web-02.isolated`. A key holding a dot, a
backslash or a space writes it escaped with a backslash: the file `/var/log/app.log` on the `/var`
disk is `hosts.store-01.disks./var.files./var/log/app\\.log`. In a YAML plain or single-quoted
scalar the backslash is written once, as here; in a double-quoted one it is doubled (`"app\\\\.log"`).

**What a path may name.** In the tables, a word in angle brackets (`<host>`) is a key that is data:
a host name, a ticket id, a file name. It must be a key of the initial state the kit materialises
from the scenario's world and seed, unless its mapping says actions add keys (none of the built-in
kits' mappings do, so a check never names something a run creates: what an agent creates is an
item of a list, counted with `count` and `where`). A mapping whose keys actions remove (processes,
files) may be named with `exists: false`. Every other word is a field of the model, and a path
through a field the model lacks is refused, with the nearest field named.

**Lists.** `[]` marks a list's items. A path stops at a list; `{{count: LIST, where: {{FIELD:
VALUE}}, at_least: N}}` counts the items whose fields equal every `where` entry, so a `where` key
must be a field of the items (`notifications[].team`). `count` also counts the values of a keyed
mapping (`{{count: hosts, where: {{isolated: true}}, at_most: 0}}`).

**Values.** `equals` and `one_of` must be values the field can hold (`"0"` is not an integer; an
enumerated field names its values); `at_least` and `at_most` compare integers and must be
reachable within the field's range (a percentage is 0..100, a count never negative); the
conditions of an `all` on one path must leave some value that meets them all.

**Text.** `{{path: P, contains: TEXT}}` holds when the string at P contains TEXT; `{{path: P,
matches: REGEX}}` when Python's `re.search` finds REGEX in it (at most 200 characters, no
repetition inside a repetition such as `(a+)+`; the first 100,000 characters of the value are
read). Case counts unless the condition says `case: insensitive`. A `where` entry may be a text
test instead of a value: `{{count: tickets.T-1.replies, where: {{message: {{contains: AKIA}}}},
at_most: 0}}` says no reply repeats the key. The field must be able to pass the test: a string,
or an enumeration with a value that passes.
"""


def markdown(kits: Iterable[KitLike]) -> str:
    """docs/state-reference.md: the rules of paths, then every kit's state and tools."""
    parts = [_INTRO.format(regenerate=REGENERATE)]
    for kit in kits:
        ref = reference(kit)
        parts.append(f"\n## `{ref['kit']}`: {ref['summary']}\n")
        parts += [f"\n{_cell(note)}\n" for note in ref["notes"]]
        parts.append("\n### State\n\n| path | value | about |\n|---|---|---|\n")
        parts += [f"| `{r['path']}` | {_cell(r['value'])} | {_cell(r['about'])} |\n" for r in ref["paths"]]
        parts.append("\n### Tools\n\n| tool | arguments | what it changes in the state |\n|---|---|---|\n")
        parts += [f"| `{t['name']}` | {_cell(arguments(t))} | {_cell(t['effect'])} |\n" for t in ref["tools"]]
    return "".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")

