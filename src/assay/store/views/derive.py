"""How one generation of views is derived from the one before: named text substitutions, each
checked to apply exactly as often as expected, so a generation's difference from its parent is
its own module's list and nothing else (and a parent that changed under it fails loudly)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: (old text, new text, how many times old occurs in the parent's body of that view)
Substitution = tuple[str, str, int]


def substituted(generation: str, name: str, body: str, substitutions: Sequence[Substitution]) -> str:
    """`body` of view `name` with every substitution applied, each checked to occur as often as it says."""
    for old, new, times in substitutions:
        if body.count(old) != times:
            raise AssertionError(f"{generation}: {old!r} is not in {name} {times} time(s)")
        body = body.replace(old, new)
    return body


def derive(generation: str, parent: Sequence[tuple[str, str]],
           substitutions: Mapping[str, Sequence[Substitution]]) -> tuple[tuple[str, str], ...]:
    """The parent's views, each with its substitutions (views named nowhere are kept as they are)."""
    unknown = set(substitutions) - {name for name, _ in parent}
    if unknown:
        raise AssertionError(f"{generation}: no view {', '.join(sorted(unknown))} in its parent")
    return tuple((name, substituted(generation, name, body, substitutions.get(name, ()))) for name, body in parent)
