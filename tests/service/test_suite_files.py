"""A suite reads only files inside its own directory, and built-in suite keys are the built-ins'
(issue 23, item 3).

- A suite that lists an absolute path (`/etc/passwd`), a `..` that climbs out of its directory, or
  a symlink that leads out — as a scenario or as its rubric — is refused in one line naming the
  file, by `assay validate` (`examine_suite`), `assay run` and `assay suite release` alike (one rule,
  `scenario.suite.inside_suite`, used by `service.suites`). A `..` that stays inside is fine.
- A user's `assay suite release` of a suite keyed `forge` (or any built-in key) is refused in one
  line, and the board's current forge stays the built-in one; the built-in documents themselves
  still release (identically).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from assay.errors import BadInput, Forbidden
from assay.service import releases
from assay.service.actors import OPERATOR
from assay.service.suites import examine_suite, resolve_suite
from assay.scenario.suite import builtin_suites_dir
from tests.board._support import MINI_CASES, mini_suite
from tests.board.test_cli_board import Cli


def _list(root: Path, scenarios: list[str] | None = None, **changes: Any) -> Path:
    doc = yaml.safe_load((root / "suite.yaml").read_text(encoding="utf-8"))
    if scenarios is not None:
        doc["scenarios"] = scenarios
    doc.update(changes)
    (root / "suite.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return root


def _escapes(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Suites that each reach outside their directory one way: {name: (suite dir, the file named)}."""
    outside = tmp_path / "outside"
    outside.mkdir(parents=True)
    shutil.copy(mini_suite(tmp_path / "source") / MINI_CASES[0], outside / "stolen.yaml")
    made: dict[str, tuple[Path, str]] = {}
    made["absolute"] = (_list(mini_suite(tmp_path / "abs"), ["/etc/passwd", MINI_CASES[1]]), "/etc/passwd")
    made["absolute scenario"] = (_list(mini_suite(tmp_path / "abs2"), [str(outside / "stolen.yaml")]),
                                 str(outside / "stolen.yaml"))
    made["dotdot"] = (_list(mini_suite(tmp_path / "dots"), ["../outside/stolen.yaml", MINI_CASES[1]]),
                      "../outside/stolen.yaml")
    linked = mini_suite(tmp_path / "linked")
    (linked / "link.yaml").symlink_to(outside / "stolen.yaml")
    made["symlink"] = (_list(linked, ["link.yaml", MINI_CASES[1]]), "link.yaml")
    rubric = mini_suite(tmp_path / "rubric")
    (outside / "rubric.yaml").write_text("traits: []\n", encoding="utf-8")
    made["rubric"] = (_list(rubric, rubric="../outside/rubric.yaml"), "../outside/rubric.yaml")
    return made


def test_files_outside_the_suite_directory_are_refused_naming_the_file(tmp_path: Path) -> None:
    for how, (suite, named) in _escapes(tmp_path).items():
        found = examine_suite(str(suite))
        assert found.bundle is None, how
        lines = [p.message for p in found.problems]
        assert len(lines) == 1 and f"'{named}'" in lines[0], (how, lines)
        assert "absolute path" in lines[0] or "outside the suite's directory" in lines[0], (how, lines)
        with pytest.raises(BadInput):
            resolve_suite(str(suite / "suite.yaml"))


def test_a_symlinked_scenario_in_a_bare_directory_is_refused_too(tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    shutil.copy(mini_suite(tmp_path / "source") / MINI_CASES[0], outside)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "x.yaml").symlink_to(outside)
    found = examine_suite(str(bare))
    assert found.bundle is None and "'x.yaml'" in found.problems[0].message


def test_a_dotdot_that_stays_inside_and_a_symlink_inside_are_fine(tmp_path: Path) -> None:
    suite = mini_suite(tmp_path / "ok")
    (suite / "sub").mkdir()
    (suite / "inner.yaml").symlink_to(suite / MINI_CASES[0])
    _list(suite, [f"sub/../{MINI_CASES[1]}", "inner.yaml"])
    assert len(resolve_suite(str(suite)).scenarios) == 2


@pytest.fixture
def cli(db_url: str, tmp_path: Path, templates: Any) -> Cli:
    templates.copy_into(db_url, "bootstrapped")
    return Cli(db_url, tmp_path)


def test_the_cli_refuses_an_escaping_suite_in_one_line_and_stores_nothing(cli: Cli, tmp_path: Path) -> None:
    before = cli.counts()
    for how, (suite, named) in _escapes(tmp_path / "suites").items():
        for command in (("suite", "release", str(suite)), ("run", str(suite), "--agent", "reference:idle")):
            line = cli.refused(*command)
            assert named in line, (how, command, line)
    assert cli.counts() == before


def test_a_built_in_suite_key_is_reserved_for_the_built_in_documents(cli: Cli, tmp_path: Path) -> None:
    before = cli.counts()
    for key in ("forge", "academy", "academy-pl"):
        impostor = mini_suite(tmp_path / key, key=key, version="9.9")
        line = cli.refused("suite", "release", str(impostor))
        assert f"suite key '{key}' is reserved" in line, line
    assert cli.counts() == before
    board = json.loads(cli("board", "forge", "--json").stdout)
    assert board["suite"]["version"] != "9.9"
    # the built-in documents themselves still release (identically: nothing new)
    again = json.loads(cli("suite", "release", str(builtin_suites_dir() / "forge"), "--json").stdout)
    assert again["key"] == "forge" and again["created"] is False


def test_the_service_refuses_a_reserved_key_before_anything_is_stored(store: Any, tmp_path: Path) -> None:
    impostor = mini_suite(tmp_path / "copy", key="forge", version="9.9")
    with pytest.raises(Forbidden, match="reserved"):
        releases.release_path(store, str(impostor), actor=OPERATOR)
    copied = tmp_path / "forge-copy"
    shutil.copytree(builtin_suites_dir() / "forge", copied)  # a byte-identical copy is still not the built-in
    _list(copied, version="9.9")
    with pytest.raises(Forbidden, match="reserved"):
        releases.release_path(store, str(copied), actor=OPERATOR)
    assert all(r["version"] != "9.9" for r in releases.ReleasesRepo(store).releases("forge"))
