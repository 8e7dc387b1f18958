"""The docs are checked like code: the site builds strictly, and every command marked runnable runs.

- `mkdocs build --strict` over mkdocs.yml: a broken link between pages, a page missing from the
  nav, a bad anchor or the HTTP API page's generation (docs/hooks/openapi.py) failing stops it.
- A fenced ```sh block preceded by the line `<!-- runnable -->` in README.md or docs/*.md is a
  command a reader is told to run. Each file's runnable blocks run in order, as one `bash -e`
  script, in a fresh temporary directory with a fresh store (`ASSAY_DB`, HOME and the data dirs
  point inside it), and must exit 0. The directory holds a `src` link to this checkout's `src`, so
  paths written from the repository's root (`src/assay/suites/forge/`) resolve.

  The script is run by bash, but its `assay` is the client of this worker's fork server
  (tests/support/forkserver.py), which imported the package once: each `assay` line is still its own process,
  with the line's argv, directory, environment and standard streams (so pipes, redirects,
  `$(...)` and exit codes keep their meaning), forked from a process that has paid the imports.
  A new interpreter a line cost about a second of CPU, most of a page's cost. The console script
  itself, started the usual way, is tested by tests/test_install.py and the `real_cli` tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARK = "<!-- runnable -->"
FENCE = re.compile(r"^```sh[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def runnable_blocks(text: str) -> list[str]:
    """The ```sh blocks that directly follow a `<!-- runnable -->` line, in order."""
    blocks = []
    for match in FENCE.finditer(text):
        lines = text[: match.start()].split("\n")  # ends with "" (the fence starts a line)
        if len(lines) >= 2 and lines[-2].strip() == MARK:
            blocks.append(match.group(1))
    return blocks


def test_runnable_blocks_are_found_only_after_the_mark() -> None:
    text = ("<!-- runnable -->\n```sh\necho one\n```\n\n```sh\necho not me\n```\n"
            "<!-- runnable -->\n\n```sh\necho not me either: a blank line between\n```\n"
            "<!-- runnable -->\n```sh\necho two\n```\n")
    assert runnable_blocks(text) == ["echo one\n", "echo two\n"]


DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
WITH_BLOCKS = [p for p in DOC_FILES if runnable_blocks(p.read_text(encoding="utf-8"))]


def test_the_readme_tour_is_runnable() -> None:
    # the README's tour is the newcomer's path: it must stay under test
    assert ROOT / "README.md" in WITH_BLOCKS
    assert len(runnable_blocks((ROOT / "README.md").read_text(encoding="utf-8"))) >= 4


def _script(blocks: list[str]) -> str:
    lines = ["set -euo pipefail"]
    for i, block in enumerate(blocks, 1):
        lines.append(f"echo '--- runnable block {i}' >&2")
        lines.append(block)
    return "\n".join(lines) + "\n"


def _python_path() -> str:
    return str(ROOT / "src") + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")


@pytest.fixture
def assay_bin() -> Path:
    """A directory holding an `assay` that runs each command line through this worker's fork server."""
    from tests.support.forkserver import assay_command

    return Path(assay_command()[0]).parent


@pytest.mark.heavy
@pytest.mark.xdist_group("docs")  # one worker runs the pages, on one fork server
@pytest.mark.parametrize("doc", WITH_BLOCKS, ids=[str(p.relative_to(ROOT)) for p in WITH_BLOCKS])
def test_runnable_blocks_run(doc: Path, tmp_path: Path, assay_bin: Path) -> None:
    blocks = runnable_blocks(doc.read_text(encoding="utf-8"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "src").symlink_to(ROOT / "src")
    bindir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env.update({
        "HOME": str(tmp_path / "home"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "ASSAY_DB": f"sqlite:///{tmp_path / 'store.db'}",
        "PATH": os.pathsep.join([str(assay_bin), bindir, env.get("PATH", "")]),
        "PYTHONPATH": _python_path(),
        "COLUMNS": "100",
    })
    done = subprocess.run(["bash", "-c", _script(blocks)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, (f"{doc.name}: a runnable block failed (exit {done.returncode})\n"
                                  f"--- stderr\n{done.stderr[-4000:]}\n--- stdout\n{done.stdout[-2000:]}")


@pytest.mark.heavy
@pytest.mark.xdist_group("docs")
def test_the_fork_servers_assay_keeps_the_shells_meaning(tmp_path: Path, assay_bin: Path) -> None:
    # what the pages rely on: exit codes, stdout into a pipe and a file, stderr apart, the line's own
    # environment and directory
    script = (
        "set -u\n"
        "assay validate missing.yaml 2> err.txt; echo \"exit=$?\"\n"
        "assay kit --help | grep -c estate > /dev/null && echo piped\n"
        "ASSAY_DB=sqlite:///$PWD/other.db assay batches --json > out.json; echo \"batches=$(cat out.json)\"\n"
        "mkdir sub && cd sub && assay validate ../missing.yaml 2>&1 | grep -q '../missing.yaml' && echo here\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env.update({"HOME": str(tmp_path), "ASSAY_DB": f"sqlite:///{tmp_path / 'store.db'}",
                "PATH": os.pathsep.join([str(assay_bin), env.get("PATH", "")])})
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines() == ["exit=2", "piped", "batches=[]", "here"], done.stderr
    assert "missing.yaml" in (tmp_path / "err.txt").read_text(encoding="utf-8")  # stderr went to its file
    assert (tmp_path / "other.db").is_file() and not (tmp_path / "store.db").exists()  # the line's own ASSAY_DB


@pytest.mark.heavy
def test_site_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src") + (os.pathsep + os.environ["PYTHONPATH"]
                                                              if os.environ.get("PYTHONPATH") else "")}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site"),
                           "--config-file", str(ROOT / "mkdocs.yml")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    site = tmp_path / "site"
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    # the API reference is generated from the app's OpenAPI at build time: every route is on the page
    from assay.web.app import Settings, create_app

    schema = create_app(Settings(db_url=None, secret=b"s" * 32)).openapi()
    for path in schema["paths"]:
        assert path in api, f"{path} missing from the generated API page"
    assert (site / "openapi.json").is_file()


def test_the_readme_stays_a_front_page() -> None:
    # issue 29: the README is the two commands, a tour and links (under 10 KB); the rest is the guide
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode("utf-8")) < 10_000
    for command in ("make demo", "make test"):
        assert command in readme
    for page in ("getting-started", "agents", "scenarios", "suites", "judges", "statistics", "api", "operating",
                 "benchmarks", "troubleshooting", "architecture"):
        assert f"](docs/{page}.md)" in readme, f"README links no docs/{page}.md"
