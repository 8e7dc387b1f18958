"""Every line of code knows its room (docs/architecture.md, "The code, package by package"): the arrows between the
packages point one way. Read from the source with `ast`, so a lazy import inside a function counts
as much as one at the top: an arrow is an arrow wherever it is written."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "assay"

# room -> rooms it must never import. Leaf modules (canonical, records, errors) are open to all.
FORBIDDEN: dict[str, set[str]] = {
    "stats": {"store", "web", "service", "run", "agents", "worlds", "score", "cli"},
    "worlds": {"agents", "score", "store", "run", "service", "scenario", "web", "cli"},
    "scenario": {"worlds", "run", "store", "service", "agents", "score", "web", "cli"},
    "store": {"run", "score", "agents", "service", "worlds", "web", "cli"},
    "score": {"run", "store", "agents", "service", "web", "cli"},
    "agents": {"scenario", "run", "store", "score", "service", "worlds", "web", "cli"},
    "run": {"store", "service", "web", "cli"},
    "service": {"web", "cli"},
    "web": {"cli"},
    "cli": set(),  # the outermost shell: it may call anything below it
}
LEAVES = {"canonical", "records", "errors", "languages", "endpoints", "located"}


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "assay" or len(parts) < 2:
        return None
    room = parts[1]
    return "cli" if room.startswith("cli") else room


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_arrows_point_down(room: str) -> None:
    wrong = []
    for path in sorted((SRC / room).rglob("*.py")):
        for module in _imports(path):
            target = _room(module)
            if target in FORBIDDEN[room]:
                wrong.append(f"{path.relative_to(SRC)} imports {module}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_leaf_modules_import_nothing_of_assay_but_leaves() -> None:
    for leaf in sorted(LEAVES):
        targets = {_room(m) for m in _imports(SRC / f"{leaf}.py")} - {None}
        assert targets <= LEAVES, f"{leaf}.py imports {sorted(targets - LEAVES)}"


def test_every_room_is_checked() -> None:
    """A new package gets its arrows written down here, not silently left out."""
    rooms = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms - {"suites"} <= set(FORBIDDEN), sorted(rooms - {"suites"} - set(FORBIDDEN))
