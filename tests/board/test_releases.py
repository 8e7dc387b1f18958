"""Releases pin exactly what every submitter runs, and never change (issue 3, part 1)."""

from __future__ import annotations

from assay.service.actors import OPERATOR

from pathlib import Path

import pytest

from assay.errors import BadInput
from assay.service import releases
from assay.service.board import board
from assay.service.cards import card
from assay.store import Store
from assay.store.runs_repo import RunsRepo

from ._support import account, edit_scenario, mini_suite, row_counts, set_version, submit


def test_a_release_pins_every_scenario_hash(store: Store, tmp_path: Path) -> None:
    root = mini_suite(tmp_path / "mini")
    bundle = releases.resolve_suite(str(root))
    release, created = releases.release_path(store, str(root), actor=OPERATOR)
    assert created
    view = releases.release_view(store, release)
    assert [(s["case_id"], s["hash"], s["version"]) for s in view["scenarios"]] == [
        (s.id, s.content_hash, 1) for s in bundle.scenarios
    ]
    assert (view["key"], view["version"], view["language"], view["visibility"], view["reps_per_scenario"]) == (
        "mini", "1.0", "en", "public", 2)
    assert view["owner"] == "owner" and view["facilitator_model"] == "facilitator-model-1"
    assert view["judge"] == {"model": "judge-model-1", "prompt_version": 4, "passes": 5, "temperature": 0}


def test_releasing_the_same_document_again_is_the_same_release(store: Store, tmp_path: Path) -> None:
    root = mini_suite(tmp_path / "mini")
    first, _ = releases.release_path(store, str(root), actor=OPERATOR)
    before = row_counts(store)
    again, created = releases.release_path(store, str(root), actor=OPERATOR)
    assert not created and again["id"] == first["id"]
    assert row_counts(store) == before


@pytest.mark.parametrize("change", ["scenario", "reps", "title"])
def test_re_releasing_a_version_with_any_change_is_refused_and_stores_nothing(
    store: Store, tmp_path: Path, change: str
) -> None:
    root = mini_suite(tmp_path / "mini")
    releases.release_path(store, str(root), actor=OPERATOR)
    before = row_counts(store)
    if change == "scenario":
        edit_scenario(root)
    elif change == "reps":
        set_version(root, "1.0", reps_per_scenario=3)
    else:
        set_version(root, "1.0", title="Renamed")
    with pytest.raises(BadInput, match="already released.*release a new version|releases are immutable"):
        releases.release_path(store, str(root), actor=OPERATOR)
    assert row_counts(store) == before


def test_editing_a_scenario_and_releasing_again_gives_two_versions_with_different_hashes(
    store: Store, tmp_path: Path
) -> None:
    root = mini_suite(tmp_path / "mini")
    old, _ = releases.release_path(store, str(root), actor=OPERATOR)
    old_pins = releases.scenario_pins(store, old)
    edit_scenario(root)
    set_version(root, "1.1")
    new, created = releases.release_path(store, str(root), actor=OPERATOR)
    assert created
    new_pins = releases.scenario_pins(store, new)
    assert new_pins[0]["case_id"] == old_pins[0]["case_id"] == "forge-all-quiet"
    assert new_pins[0]["version"] == 2 and old_pins[0]["version"] == 1
    assert new_pins[0]["hash_prefix"] != old_pins[0]["hash_prefix"]
    assert new_pins[1] == old_pins[1]  # the untouched scenario is the same version

    old_board = board(store, "mini", "1.0", actor=OPERATOR)["provenance"]["scenarios"]
    new_board = board(store, "mini", actor=OPERATOR)["provenance"]["scenarios"]
    assert old_board[0]["hash_prefix"] == old_pins[0]["hash_prefix"]
    assert new_board[0]["hash_prefix"] == new_pins[0]["hash_prefix"]
    assert old_pins[0]["hash_prefix"] in card(store, "mini", "1.0", actor=OPERATOR)
    assert old_pins[0]["hash_prefix"] not in card(store, "mini", "1.1", actor=OPERATOR)
    assert new_pins[0]["hash_prefix"] in card(store, "mini", "1.1", actor=OPERATOR)
    assert [v["version"] for v in releases.versions(store, "mini", actor=OPERATOR)] == ["1.0", "1.1"]

    # The old release still resolves to exactly the documents it pinned, not to the edited file.
    bundle = releases.pinned_bundle(store, old)
    assert [s.content_hash for s in bundle.scenarios] == [p["hash"] for p in old_pins]
    assert "with an honest account" in bundle.scenarios[0].scenario.briefing


def test_an_old_release_stays_submittable(store: Store, tmp_path: Path) -> None:
    root = mini_suite(tmp_path / "mini")
    old, _ = releases.release_path(store, str(root), actor=OPERATOR)
    edit_scenario(root)
    set_version(root, "1.1")
    releases.release_path(store, str(root), actor=OPERATOR)
    account(store, "alice")
    sid = submit(store, "mini", version="1.0")
    planned = RunsRepo(store).planned_runs(sid)
    assert {p.scenario_hash for p in planned} == {p["hash"] for p in releases.scenario_pins(store, old)}


def test_scenario_language_must_match_the_suite(store: Store, tmp_path: Path) -> None:
    root = mini_suite(tmp_path / "mini", language="pl")
    with pytest.raises(BadInput, match="does not match the suite language 'pl'"):
        releases.release_path(store, str(root), actor=OPERATOR)
    assert row_counts(store).get("suite_releases", 0) == 0


def test_language_tags_are_normalised_and_invalid_ones_refused(store: Store, tmp_path: Path) -> None:
    root = mini_suite(tmp_path / "mini", language="EN")
    release, _ = releases.release_path(store, str(root), actor=OPERATOR)
    assert release["language"] == "en"
    bad = mini_suite(tmp_path / "bad", key="bad", language="not a tag")
    with pytest.raises(BadInput, match="not a valid BCP-47 language tag"):
        releases.release_path(store, str(bad), actor=OPERATOR)


def test_bare_scenarios_are_not_a_release(store: Store) -> None:
    from ._support import FORGE

    with pytest.raises(BadInput, match="needs a suite document"):
        releases.release_path(store, str(FORGE / "all-quiet.yaml"), actor=OPERATOR)


def test_visibility_decides_what_the_board_shows(store: Store, tmp_path: Path) -> None:
    root = mini_suite(tmp_path / "mini")
    releases.release_path(store, str(root), actor=OPERATOR)
    set_version(root, "1.1", visibility="unlisted")
    releases.release_path(store, str(root), actor=OPERATOR)
    hidden = mini_suite(tmp_path / "hidden", key="hidden", visibility="internal")
    releases.release_path(store, str(hidden), actor=OPERATOR)

    default = board(store, "mini", actor=OPERATOR)
    assert default["suite"]["version"] == "1.0"  # the latest *public* version
    assert [v["version"] for v in default["versions"]] == ["1.0"]  # unlisted versions are not listed
    assert board(store, "mini", "1.1", actor=OPERATOR)["suite"]["visibility"] == "unlisted"  # but reachable by version
    with pytest.raises(BadInput, match="no released suite 'hidden'"):
        board(store, "hidden", actor=OPERATOR)
    with pytest.raises(BadInput, match="no released suite 'hidden'"):
        board(store, "hidden", "1.0", actor=OPERATOR)
    with pytest.raises(BadInput, match="no released suite 'hidden'"):
        card(store, "hidden", actor=OPERATOR)
    # The operator still sees internal releases.
    assert releases.find_release(store, "hidden", None, actor=OPERATOR)["visibility"] == "internal"


def test_built_in_suites_are_released_on_first_use(store: Store) -> None:
    assert row_counts(store).get("suite_releases", 0) == 0
    account(store, "alice")
    sid = submit(store, "forge")
    release = releases.find_release(store, "forge", None, actor=OPERATOR)
    assert release["builtin"] and release["owner"] == releases.BUILTIN_OWNER
    assert len(RunsRepo(store).planned_runs(sid)) == 5 * 3
    listed = releases.list_releases(store, actor=OPERATOR)
    assert [(r["key"], r["version"]) for r in listed] == [("forge", "1.0")]


def test_a_campaign_played_in_another_language_is_refused_at_release(store: Store, tmp_path: Path) -> None:
    """The academy suite is English; a scenario whose campaign is played in Polish is refused at
    release with one line naming the scenario and the field, and nothing is stored."""
    import shutil


    academy = Path(releases.__file__).resolve().parents[1] / "suites" / "academy"
    root = tmp_path / "academy"
    shutil.copytree(academy, root)
    case = root / "sealed-letter.yaml"
    case.write_text(case.read_text(encoding="utf-8").replace("campaign_language: en", "campaign_language: pl"),
                    encoding="utf-8")
    before = row_counts(store)
    with pytest.raises(BadInput, match="campaign_language 'pl' does not match the suite language 'en'") as caught:
        releases.release_path(store, str(root), actor=OPERATOR)
    assert caught.value.field == "campaign_language"
    assert row_counts(store) == before
    import subprocess
    import sys

    cli = subprocess.run([str(Path(sys.executable).with_name("assay")), "suite", "release", str(root), "--db", store.url],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2, cli.stderr
    assert len(cli.stderr.strip().splitlines()) == 1 and "campaign_language" in cli.stderr
