"""Documents → validated scenarios with their content hash.

A scenario's content hash is SHA-256 over the RFC 8785 canonical JSON of
`{"document": <validated document>, "world": <fingerprint>}`, where the fingerprint is the hash of
the initial state the kit materialises from the seed: change the kit's code so the world differs,
and the hash changes with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rfc8785
from pydantic import ValidationError

from assay.errors import BadInput
from assay.canonical import canonical_hash
from assay.scenario.models import Scenario
from assay.scenario.yamlsafe import load_yaml_file
from assay.worlds.kits import get_kit


@dataclass(frozen=True)
class LoadedScenario:
    scenario: Scenario
    document: dict[str, Any]
    world_spec: Any
    initial_state: dict[str, Any]
    world_fingerprint: str
    content_hash: str
    checks_hash: str

    @property
    def id(self) -> str:
        return self.scenario.id


def describe_error(exc: ValidationError, prefix: str = "") -> str:
    """The first validation error as `field.path: message`, plus how many more there are."""
    errors = exc.errors(include_url=False)
    # a typo'd field shows up as "unknown" *and* "missing": name the typo first
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = prefix
    for part in first["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else ("." if loc else "") + str(part)
    loc = _drop_union_tags(loc)
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
    elif first["type"] == "missing":
        msg = "required field is missing"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    elif first["type"].endswith("_type"):
        msg = f"{msg} (got {type(first.get('input')).__name__} {first.get('input')!r})"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc or 'document'}: {msg}{more}"


def _drop_union_tags(loc: str) -> str:
    # pydantic puts the chosen union tag into the location (expect.path.at_least → expect.at_least)
    for tag in ("path", "count", "all", "any", "not"):
        loc = loc.replace(f"expect.{tag}.", "expect.").replace(f"].{tag}.", "].")
    return loc


def parse_scenario(raw: Any, where: str) -> LoadedScenario:
    """Validate a parsed document and compute its hashes; every problem is one BadInput line."""
    if not isinstance(raw, dict):
        raise BadInput("a scenario document must be a mapping at the top level", where)
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        raise BadInput(describe_error(exc), where) from None
    try:
        kit = get_kit(scenario.kit)
    except BadInput as exc:
        raise BadInput(f"kit: {exc.message}", where) from None
    try:
        world_spec = kit.parse_world(scenario.world)
    except ValidationError as exc:
        raise BadInput(describe_error(exc, "world"), where) from None
    initial = kit.materialise(world_spec, scenario.seed)
    for section, items in (("checks", scenario.checks), ("win_conditions", scenario.win_conditions)):
        for i, item in enumerate(items):
            unknown = sorted(r for r in item.expect.roots() if r not in initial)
            if unknown:
                raise BadInput(
                    f"{section}[{i}].expect: '{unknown[0]}' is not part of the {scenario.kit} state "
                    f"(it has {', '.join(sorted(initial))})", where)
    document = scenario.model_dump(mode="json", by_alias=True)
    document["world"] = world_spec.model_dump(mode="json", by_alias=True)
    try:
        fingerprint = canonical_hash(initial)
        content_hash = canonical_hash({"document": document, "world": fingerprint})
    except rfc8785.CanonicalizationError as exc:
        raise BadInput(f"not canonical JSON: {exc} (integers must lie within ±(2^53−1))", where) from None
    checks_hash = canonical_hash(document["checks"])
    return LoadedScenario(scenario, document, world_spec, initial, fingerprint, content_hash, checks_hash)


def load_scenario(path: str | Path) -> LoadedScenario:
    return parse_scenario(load_yaml_file(path), str(path))
