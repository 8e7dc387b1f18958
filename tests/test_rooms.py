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
LEAVES = {"canonical", "records", "errors", "languages", "endpoints", "located", "jsontypes", "jsontext"}


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


# -- every module, and the arrows between modules ----------------------------------------------

#: Top-level modules that are not leaves, with what they may import: `__init__` loads an agent on
#: demand; `demo` and `__main__` are shells beside `cli`, free to call anything below (`demo` prints
#: with `cli.ui`).
TOP_MODULES: dict[str, set[str] | None] = {"__init__": {"agents"}, "demo": None, "__main__": None}

#: `service/` in layers, lowest first; a module imports service modules of lower layers only (the
#: foundation's modules also each other). Where a lower layer needs a higher one, it is handed a
#: callable. See docs/architecture.md, "service".
SERVICE_LAYERS: list[tuple[str, set[str]]] = [
    ("foundation", {"__init__", "actors", "secret", "suites", "platform_config", "accounts", "admins", "keys",
                    "panel", "releases", "usage"}),
    ("execution and judgements read", {"execution", "judgements"}),
    ("board facts and figures, kept current by completion", {"board"}),
    ("digests (stamped by completion) and exports", {"exports"}),
    ("completion", {"completion"}),
    ("use cases", {"batches", "runs", "submissions", "scoring", "remote"}),
    ("read side", {"results", "cards", "compare", "verify", "catalog", "agreement"}),
    ("interop: play over MCP, Inspect logs", {"mcp_play", "inspect_logs"}),
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = ("assay",) + path.relative_to(SRC).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _graph() -> dict[str, set[str]]:
    """module -> the assay modules it imports, at the top or inside a function alike. `from pkg
    import sub` is an arrow to the submodule `pkg.sub`, not to the package's `__init__`."""
    modules = _modules()

    def nearest(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {nearest(alias.name) for alias in node.names if alias.name.startswith("assay")}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("assay"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    targets.add(sub if sub in modules else nearest(node.module))
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


#: Circles allowed to remain: none (the snapshot's maintainer command, which needs `store/db.py`, lives
#: in `store/refresh_snapshot.py`, apart from the snapshot `db` builds new stores from).
KNOWN_CYCLES: list[list[str]] = []


def test_no_import_cycle_anywhere() -> None:
    """No two modules under src/assay import each other, directly or around a circle, whether the
    import is at the top of the module or inside a function."""
    found = _cycles(_graph())
    assert [c for c in found if c not in KNOWN_CYCLES] == [], found


def test_service_arrows_point_down_its_layers() -> None:
    layer_of = {name: i for i, (_, names) in enumerate(SERVICE_LAYERS) for name in names}
    wrong = []
    for module, targets in _graph().items():
        if not module.startswith("assay.service"):
            continue
        own = layer_of[module.split(".")[2] if module.count(".") >= 2 else "__init__"]
        for target in targets:
            if not target.startswith("assay.service."):
                continue
            theirs = layer_of[target.split(".")[2]]
            if theirs > own or (theirs == own and own != 0):
                wrong.append(f"{module} ({SERVICE_LAYERS[own][0]}) imports {target} ({SERVICE_LAYERS[theirs][0]})")
    assert not wrong, "\n".join(sorted(wrong))


def test_every_service_module_has_a_layer() -> None:
    modules = {p.stem for p in (SRC / "service").glob("*.py")}
    layered = set().union(*(names for _, names in SERVICE_LAYERS))
    assert modules == layered, f"no layer: {sorted(modules - layered)}; gone: {sorted(layered - modules)}"


def test_every_top_level_module_is_covered() -> None:
    """Every module at the package root is a leaf or has its rule in TOP_MODULES."""
    modules = {p.stem for p in SRC.glob("*.py")}
    assert modules <= LEAVES | set(TOP_MODULES), sorted(modules - LEAVES - set(TOP_MODULES))


@pytest.mark.parametrize("top", sorted(TOP_MODULES))
def test_top_level_modules_keep_their_rule(top: str) -> None:
    allowed = TOP_MODULES[top]
    path = SRC / f"{top}.py"
    if allowed is None or not path.exists():
        return
    targets = {_room(m) for m in _imports(path)} - {None} - LEAVES
    assert targets <= allowed, f"{top}.py imports {sorted(targets - allowed)}"
