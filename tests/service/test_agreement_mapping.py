"""Where a suite says which traits correspond to which panel categories (issue 12, item 7):
`panel_categories` in the suite document. Absent, a release hashes exactly as before the field
existed; present, it is pinned by the release hash and checked against the rubric and the panel's
taxonomy."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from assay.errors import BadInput, Invalid
from assay.scenario.suite import builtin_suites_dir
from assay.scenario.yamlsafe import load_yaml_file
from assay.service.releases import panel_categories, prepare
from assay.service.suites import resolve_suite

#: Release hashes as they were before `panel_categories` existed (forge 1.0 and academy 1.1 are
#: released in stores already; a hash that moved would refuse them as changed).
FORGE_1_0 = "246b946321c5b35e48d0cdb9b5cec87851387254c05b5d4a3999827c834d054f"
ACADEMY_1_1 = "e3427ba354b5fb0eec76c6d9e8fe66b6f151ab55294301b613a091ef0f18fadd"


def _academy(tmp_path: Path, edit) -> Path:  # noqa: ANN001 - a function of the suite text
    target = tmp_path / "academy"
    shutil.copytree(builtin_suites_dir() / "academy", target)
    suite = target / "suite.yaml"
    suite.write_text(edit(suite.read_text(encoding="utf-8")), encoding="utf-8")
    return target


def _without_mapping(text: str, version: str = "1.1") -> str:
    kept, skipping = [], False
    for line in text.splitlines():
        if line.startswith("panel_categories:"):
            skipping = True
            continue
        if skipping and line.startswith("  "):
            continue
        skipping = False
        kept.append(line)
    return "\n".join(kept).replace('version: "1.2"', f'version: "{version}"') + "\n"


def test_a_suite_without_the_mapping_hashes_as_it_did_before_it_existed(tmp_path: Path) -> None:
    assert prepare(resolve_suite("forge"), builtin=True).row["release_hash"] == FORGE_1_0
    old = prepare(resolve_suite(str(_academy(tmp_path, _without_mapping))), builtin=True)
    assert old.row["release_hash"] == ACADEMY_1_1
    assert "panel_categories" not in old.row["document"] and panel_categories(old.row) == {}


def test_the_built_in_academy_maps_its_traits_and_the_mapping_is_pinned(tmp_path: Path) -> None:
    release = prepare(resolve_suite("academy"), builtin=True).row
    assert release["version"] == "1.2"
    declared = load_yaml_file(builtin_suites_dir() / "academy" / "suite.yaml")["panel_categories"]
    assert panel_categories(release) == declared and set(declared) <= set(r["key"] for r in release["rubric"]["traits"])
    # the rubric (what the judge measures) is academy 1.1's; only the release moved
    old = prepare(resolve_suite(str(_academy(tmp_path, _without_mapping))), builtin=True).row
    assert release["rubric_hash"] == old["rubric_hash"] and release["release_hash"] != old["release_hash"]


@pytest.mark.parametrize(("mapping", "problem"), [
    ("  no_such_trait: safety", "not a trait of the suite's rubric"),
    ("  goal_pursuit: no-such-category", "not a panel category"),
])
def test_a_mapping_names_rubric_traits_and_panel_categories(tmp_path: Path, mapping: str, problem: str) -> None:
    path = _academy(tmp_path, lambda text: _without_mapping(text, "1.2") + f"panel_categories:\n{mapping}\n")
    with pytest.raises(Invalid, match=problem) as refused:
        prepare(resolve_suite(str(path)))
    assert refused.value.field == "panel_categories"


@pytest.mark.parametrize("mapping", ["panel_categories: {}", "panel_categories: {Goal: safety}",
                                     "panel_categories: {goal_pursuit: 3}"])
def test_a_malformed_mapping_is_refused_as_a_document_problem(tmp_path: Path, mapping: str) -> None:
    path = _academy(tmp_path, lambda text: _without_mapping(text, "1.2") + mapping + "\n")
    with pytest.raises(BadInput, match="panel_categories"):
        prepare(resolve_suite(str(path)))
