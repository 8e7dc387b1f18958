"""A lean install (issue 28, item 4): `pip install assay` pulls what the code imports and nothing
more; Ray (`assay[ray]`) and Inspect AI (`assay[inspect]`) are extras, each imported by one module
only, inside a function, so the core (the CLI, the service, the web app, an `assay run`) never
loads them, and `--executor ray` without Ray is one line saying how to install it.

The imports are read from the source with `ast` (as tests/test_rooms.py reads the arrows), the
declared dependencies from pyproject.toml, and the two are held to each other."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.cli import run_main

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "assay"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

#: extra -> (the distribution it adds, the import name, the one module that may import it)
EXTRAS = {
    "ray": ("ray", "ray", "run/executors/ray.py"),
    "inspect": ("inspect-ai", "inspect_ai", "service/inspect_logs.py"),
}
#: modules that only ask whether an extra imports (to refuse in one line), by import name
PROBES = {"ray": {"run/executors/__init__.py"}, "inspect_ai": {"service/inspect_logs.py"}}


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]).lower()


@functools.cache  # the source is read once per test process (two tests ask)
def _third_party_imports() -> dict[str, dict[str, bool]]:
    """{top-level import name: {module path: imported at module level}} for every import of a
    package that is neither the standard library nor assay."""
    found: dict[str, dict[str, bool]] = {}
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = {id(n) for n in tree.body}
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                root = name.split(".")[0]
                if root in sys.stdlib_module_names or root == "assay":
                    continue
                where = found.setdefault(root, {})
                rel = str(path.relative_to(SRC))
                where[rel] = where.get(rel, False) or id(node) in top
    return found


def _provides(dist: str) -> set[str]:
    """The top-level import names an installed distribution provides (read off its file list)."""
    files = importlib.metadata.distribution(dist).files or []
    tops = {f.parts[0].removesuffix(".py") for f in files if f.parts and not f.parts[0].endswith((".dist-info", ".data"))}
    return {t for t in tops if t.isidentifier()}


def test_pyproject_declares_what_the_code_imports_and_nothing_it_does_not() -> None:
    core = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    extras = {extra: {_name(r) for r in reqs} for extra, reqs in PYPROJECT["project"]["optional-dependencies"].items()}
    declared = core | extras["ray"] | extras["inspect"]
    provides = {dist: _provides(dist) for dist in declared}
    imports = _third_party_imports()
    undeclared = {name: sorted(where) for name, where in imports.items()
                  if not any(name in names for names in provides.values())}
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
    unused = sorted(dist for dist, names in provides.items() if not names & set(imports))
    assert not unused, f"declared but never imported by src/assay: {unused}"
    for extra, (dist, _, _) in EXTRAS.items():
        assert extras[extra] == {dist}, extra
        assert dist not in core, f"{dist} is an extra (assay[{extra}]), not a core dependency"
    assert "assay" in extras["dev"] and "[ray,inspect]" in "".join(PYPROJECT["project"]["optional-dependencies"]["dev"]), \
        "`make test` installs .[dev]: dev must pull the extras the tests test"


def test_each_extra_is_imported_by_its_one_module_and_only_inside_functions() -> None:
    imports = _third_party_imports()
    for _extra, (_, name, module) in EXTRAS.items():
        where = imports.get(name, {})
        assert module in where, f"{module} no longer imports {name}: update EXTRAS"
        assert set(where) <= {module} | PROBES[name], f"{name} imported outside {module}: {sorted(where)}"
        assert not any(where.values()), f"{name} imported at module level in {sorted(m for m, top in where.items() if top)}"


def test_executor_ray_without_ray_is_one_line_saying_how_to_install_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as where it is not installed
    db = tmp_path / "assay.db"
    code, out, err = run_main(["run", "forge", "--agent", "reference:diligent", "--executor", "ray",
                               "--db", f"sqlite:///{db}"], cwd=tmp_path)
    assert (code, out) == (2, "")
    assert err.splitlines() == ["assay: error: --executor ray: Ray is not installed here; install it with: "
                                "pip install 'assay[ray]'"]
    assert not db.exists(), "refused before anything was stored"


#: imports the core's entry points, plays a small batch through the CLI's main, and says which of
#: the extras' packages got loaded
_PROBE = """
import json, sys
import assay.cli, assay.service.runs, assay.service.results, assay.web.app
from assay.cli import main
sys.argv = ["assay", "run", "forge", "--agent", "reference:diligent", "--trials", "1", "--json", "--db", sys.argv[1]]
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & {"ray", "inspect_ai"})), file=sys.stderr)
"""


@pytest.mark.heavy  # a fresh interpreter: this one may have loaded Ray for the Ray tests
def test_the_core_and_a_run_never_import_the_extras(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE, f"sqlite:///{tmp_path / 'assay.db'}"], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["summary"]["trials"] == 5  # the run really played
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []
