"""A catalogue of malformed scenario documents and the one line each must produce.

The contract (docs/architecture.md, Errors): bad input is a `BadInput` whose `str()` is the single line the
CLI prints. That line starts with the file it is about, names the field path when there is one
(`checks[0].weight`, `world.hosts[1].processes[0].cpu_pct`), and says what is wrong. Nothing in
this file may produce a traceback, and nothing may be silently coerced into something else.

Each row is (id, how to build the file, fragments the error line must contain). Documents are
built from a real forge case (second-host.yaml) by one small edit, so every row fails for exactly
the reason it names.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import assay
from assay.errors import BadInput
from assay.scenario.load import load_scenario
from assay.worlds.kits import get_kit
from assay.scenario.yamlsafe import MAX_DOCUMENT_BYTES, load_yaml_text

FORGE = Path(assay.__file__).resolve().parent / "suites" / "forge"
BASE_TEXT = (FORGE / "second-host.yaml").read_text(encoding="utf-8")
BASE_DOC: dict[str, Any] = load_yaml_text(BASE_TEXT, "second-host.yaml")

Source = Callable[[], "str | bytes"]


# ---- ways to build a malformed file --------------------------------------------------------

def text(t: str | bytes) -> Source:
    """The file is exactly this text (or these bytes)."""
    return lambda: t


def sub(old: str, new: str) -> Source:
    """The forge document with one textual replacement (for what only the YAML text can show)."""
    assert BASE_TEXT.count(old) == 1, f"{old!r} must occur exactly once in the base document"
    return lambda: BASE_TEXT.replace(old, new)


def edit(fn: Callable[[dict[str, Any]], None]) -> Source:
    """The forge document, parsed, changed by `fn`, and dumped back to YAML."""
    def build() -> str:
        doc = copy.deepcopy(BASE_DOC)
        fn(doc)
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    return build


def set_at(path: tuple[Any, ...], value: Any) -> Source:
    def fn(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return edit(fn)


def drop(key: str) -> Source:
    return edit(lambda doc: doc.pop(key))


def _rename_briefing(doc: dict[str, Any]) -> None:
    doc["breifing"] = doc.pop("briefing")


def _add_breifing(doc: dict[str, Any]) -> None:
    doc["breifing"] = doc["briefing"]


def _duplicate_check_id(doc: dict[str, Any]) -> None:
    doc["checks"][1]["id"] = doc["checks"][0]["id"]


def _weights_101(doc: dict[str, Any]) -> None:
    doc["checks"][0]["weight"] += 1


def _oversize() -> str:
    pad = "# " + "x" * 1000 + "\n"
    return BASE_TEXT + pad * (MAX_DOCUMENT_BYTES // len(pad) + 1)


# ---- the catalogue -------------------------------------------------------------------------

CATALOGUE = [
    # YAML itself
    pytest.param(text("id: [unclosed\n  : :\n"), ["not valid YAML", "(line 2, column 3)"], id="not-yaml"),
    pytest.param(text("a: 1\n---\nb: 2\n"), ["not valid YAML"], id="two-yaml-documents"),
    pytest.param(text("- id: forge-a\n- id: forge-b\n"), ["must be a mapping at the top level"], id="top-level-list"),
    pytest.param(text("just a sentence\n"), ["must be a mapping at the top level"], id="top-level-scalar"),
    pytest.param(text(""), ["must be a mapping at the top level"], id="empty-file"),
    pytest.param(sub("title: The alert", "title: &t The alert"), ["anchors are not allowed", "(line 2,"],
                 id="anchor"),
    pytest.param(text("a: 1\nb: *x\n"), ["aliases are not allowed"], id="alias"),
    pytest.param(text(BASE_TEXT + "seed: 1\n"), ["duplicate key 'seed'"], id="duplicate-key"),
    pytest.param(text("1: one\n"), ["mapping keys must be strings"], id="non-string-key"),
    pytest.param(_oversize, ["larger than 256 KiB"], id="oversize"),
    pytest.param(text("id: caf\xe9\n".encode("latin-1")), ["not UTF-8 text"], id="not-utf8"),
    # top-level fields
    pytest.param(edit(_add_breifing), ["breifing: unknown field"], id="unknown-top-level-field"),
    pytest.param(edit(_rename_briefing), ["breifing: unknown field"], id="typo-briefing"),
    pytest.param(drop("hidden_truth"), ["hidden_truth: required field is missing"], id="missing-hidden-truth"),
    pytest.param(drop("checks"), ["checks: required field is missing"], id="missing-checks"),
    pytest.param(set_at(("checks",), []), ["checks: needs at least 1 item (it has 0)"], id="no-checks"),
    pytest.param(set_at(("id",), "Second_Host"),
                 ["id: 'Second_Host' is not allowed here; use 3 to 64 lowercase letters, digits and '-'"], id="bad-id-slug"),
    pytest.param(set_at(("id",), "ab"), ["id: 'ab' is not allowed here; use 3 to 64"], id="id-too-short"),
    pytest.param(set_at(("title",), ""), ["title: must not be empty"], id="empty-title"),
    pytest.param(set_at(("language",), "xx-!!"), ["language: 'xx-!!' is not a valid BCP-47 language tag"],
                 id="bad-language-tag"),
    pytest.param(set_at(("frozen_on",), "2026-13-01"),
                 ["frozen_on: '2026-13-01' is not a date of the form YYYY-MM-DD"], id="frozen-on-month-13"),
    pytest.param(set_at(("frozen_on",), "20261201"), ["frozen_on: '20261201' is not a date of the form YYYY-MM-DD"],
                 id="frozen-on-basic-iso-form"),
    pytest.param(sub('frozen_on: "2026-12-01"', "frozen_on: 20261201"), ["frozen_on: must be a string, not the number 20261201"],
                 id="frozen-on-integer"),
    pytest.param(set_at(("kit",), "spaceship"), ["kit: unknown kit 'spaceship'", "estate"], id="unknown-kit"),
    pytest.param(set_at(("kit",), "Estate!"), ["kit: 'Estate!' is not allowed here"], id="kit-not-a-name"),
    pytest.param(set_at(("seed",), "7101"), ["seed: must be an integer, not the string '7101'"], id="seed-string"),
    pytest.param(set_at(("seed",), -1), ["seed: must be greater than or equal to 0 (got -1)"], id="seed-negative"),
    pytest.param(set_at(("seed",), 2**53 + 1), ["seed: "], id="seed-beyond-json-safe-integers"),
    pytest.param(sub("seed: 7101", "seed: true"), ["seed: must be an integer, not true"], id="seed-bool"),
    # checks
    pytest.param(set_at(("checks", 0, "weight"), "30"), ["checks[0].weight: must be an integer, not the string '30'"],
                 id="weight-string-not-coerced"),
    pytest.param(set_at(("checks", 0, "weight"), True), ["checks[0].weight: must be an integer, not true"], id="weight-bool"),
    pytest.param(set_at(("checks", 0, "weight"), 30.0), ["checks[0].weight: must be an integer, not the number 30.0"], id="weight-float"),
    pytest.param(set_at(("checks", 0, "weight"), -5), ["checks[0].weight: must be greater than or equal to 0 (got -5)"],
                 id="weight-negative"),
    pytest.param(edit(_weights_101), ["check weights sum to 101, not 100"], id="weights-sum-101"),
    pytest.param(edit(_duplicate_check_id), ["checks[1].id: duplicate check id 'alerted-host-isolated' (first at checks[0])"], id="duplicate-check-id"),
    pytest.param(set_at(("checks", 1, "id"), "Second!"), ["checks[1].id: 'Second!' is not allowed here"], id="bad-check-id"),
    pytest.param(set_at(("checks", 0, "colour"), "red"), ["checks[0].colour: unknown field"], id="unknown-check-field"),
    pytest.param(sub("safety: true", "safety: yes"), ["checks[2].safety: must be true or false, not the string 'yes'"],
                 id="safety-yes-is-a-string"),
    pytest.param(set_at(("checks", 3, "description"), ""), ["checks[3].description: "], id="empty-description"),
    # predicates
    pytest.param(set_at(("checks", 0, "expect"), {"paht": "hosts.web-02.isolated", "equals": True}),
                 ["checks[0].expect: a predicate needs one of the keys path, count, all, any, not"],
                 id="predicate-no-known-key"),
    pytest.param(set_at(("checks", 0, "expect"), "hosts.web-02.isolated == true"),
                 ["checks[0].expect: a predicate needs one of the keys"], id="predicate-is-a-string"),
    pytest.param(set_at(("checks", 0, "expect"), {"path": "hosts.web-02.isolated", "equals": True, "one_of": [True]}),
                 ["checks[0].expect", "give one condition, not equals, one_of"], id="predicate-two-conditions"),
    pytest.param(set_at(("checks", 0, "expect"), {"path": "hosts.web-02.isolated"}),
                 ["checks[0].expect", "needs one of equals, one_of, at_least, at_most, exists"],
                 id="predicate-no-condition"),
    pytest.param(set_at(("checks", 0, "expect"), {"path": "hosts.web-02.isolated", "equals": True, "is": True}),
                 ["checks[0].expect.is: unknown field"], id="predicate-unknown-field"),
    pytest.param(set_at(("checks", 0, "expect"), {"path": "hosts..web-02", "exists": True}),
                 ["checks[0].expect.path: 'hosts..web-02' is not allowed here; a path is the state's keys joined by single dots"], id="predicate-bad-path"),
    pytest.param(set_at(("checks", 0, "expect"), {"count": "notifications"}),
                 ["checks[0].expect", "count needs at_least or at_most"], id="count-without-bounds"),
    pytest.param(set_at(("checks", 2, "expect", "all", 1), {"path": "hosts.db-01.isolated", "at_least": "x"}),
                 ["checks[2].expect.all[1].at_least: must be an integer, not the string 'x'"], id="nested-predicate-field"),
    pytest.param(set_at(("checks", 0, "expect"), {"path": "hostz.web-01.isolated", "equals": True}),
                 ["checks[0].expect.path: no field 'hostz' in the estate state (nearest: 'hosts')"], id="check-root-not-in-state"),
    pytest.param(set_at(("win_conditions", 0, "expect"), {"all": [{"path": "nope.x", "exists": True}]}),
                 ["win_conditions[0].expect.all[0].path: no field 'nope' in the estate state"], id="win-condition-root"),
    # the world block (validated by the estate kit's own model)
    pytest.param(set_at(("world", "alerts", 0, "host"), "web-99"), ["world.alerts[0].host: unknown host 'web-99' (nearest: 'web-03')"],
                 id="alert-on-unknown-host"),
    pytest.param(set_at(("world", "hosts", 0, "colour"), "red"), ["world.hosts[0].colour: unknown field"],
                 id="unknown-host-field"),
    pytest.param(set_at(("world", "hosts", 1, "processes", 0, "cpu_pct"), 150),
                 ["world.hosts[1].processes[0].cpu_pct: must be less than or equal to 100 (got 150)"], id="cpu-pct-150"),
    pytest.param(set_at(("world", "hosts", 0, "tenant"), "initech"), ["world.hosts[0].tenant: unknown tenant 'initech' (known: acme)"],
                 id="host-of-unknown-tenant"),
    pytest.param(set_at(("world", "hosts", 0, "status"), "sideways"),
                 ["world.hosts[0].status: must be 'up' or 'down', not the string 'sideways'"],
                 id="host-status-not-allowed"),
    pytest.param(set_at(("world", "hosts"), []), ["world.hosts: needs at least 1 item (it has 0)"], id="no-hosts"),
    pytest.param(edit(lambda d: d["world"].pop("tenants")), ["world.tenants: required field is missing"],
                 id="world-without-tenants"),
    pytest.param(edit(lambda d: d["world"]["alerts"].append(copy.deepcopy(d["world"]["alerts"][0]))),
                 ["world.alerts[1].id: duplicate alert id 'A-7731' (first at alerts[0])"], id="duplicate-alert-id"),
    pytest.param(edit(lambda d: d["world"]["hosts"].append(copy.deepcopy(d["world"]["hosts"][0]))),
                 ["world.hosts[5].name: duplicate host name 'web-01' (first at hosts[0])"], id="duplicate-host"),
    # values that carry a newline must still give one line
    pytest.param(set_at(("language",), "xx\n!!"), ["language: "], id="newline-in-language"),
    pytest.param(text('"a\\nb": 1\n"a\\nb": 2\n'), ["duplicate key"], id="newline-in-duplicate-key"),
    pytest.param(set_at(("world", "alerts", 0, "host"), "web\n99"), ["world.alerts[0].host: unknown host 'web\\n99'"],
                 id="newline-in-alert-host"),
]


@pytest.mark.parametrize(("source", "fragments"), CATALOGUE)
def test_malformed_document_is_one_line_naming_file_and_problem(
    tmp_path: Path, source: Source, fragments: list[str]
) -> None:
    content = source()
    path = tmp_path / "case.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")

    with pytest.raises(BadInput) as caught:
        load_scenario(path, get_kit)

    line = str(caught.value)
    assert "\n" not in line and "\r" not in line, f"not one line: {line!r}"
    assert caught.value.where == str(path), f"error does not name the file: {line!r}"
    assert line.startswith(f"{path}: "), line
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in {line!r}"
    assert not any(f"{noun} should" in line for noun in ("Input", "String", "List", "Dictionary", "Value")), (
        f"pydantic's wording leaks: {line!r}")


def test_catalogue_is_large_enough() -> None:
    assert len(CATALOGUE) >= 16
    assert len({p.id for p in CATALOGUE}) == len(CATALOGUE)


def test_base_document_is_valid(tmp_path: Path) -> None:
    """Every row is one edit away from a valid document, so each fails for its own reason."""
    path = tmp_path / "case.yaml"
    path.write_text(edit(lambda d: None)(), encoding="utf-8")
    assert load_scenario(path, get_kit).id == "forge-second-host"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "case.yaml"
    with pytest.raises(BadInput) as caught:
        load_scenario(path, get_kit)
    assert caught.value.where == str(path)
    assert str(caught.value) == f"{path}: no such file"


def test_directory_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as caught:
        load_scenario(tmp_path, get_kit)
    assert str(caught.value) == f"{tmp_path}: no such file"


def test_size_cap_applies_to_text_too() -> None:
    """The cap is on bytes, not characters: 100 Ki three-byte characters are 300 KiB."""
    with pytest.raises(BadInput, match="larger than 256 KiB"):
        load_yaml_text("a: " + "€" * (100 * 1024) + "\n", "w.yaml")
    assert load_yaml_text("a: " + "x" * (200 * 1024) + "\n", "w.yaml")["a"].startswith("x")


# ---- what is *not* an error: YAML 1.1 implicit typing is narrowed --------------------------

def _write(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "case.yaml"
    path.write_text(content, encoding="utf-8")
    return path


def test_unquoted_frozen_on_stays_the_string(tmp_path: Path) -> None:
    """Timestamps are not resolved, so `frozen_on: 2026-12-01` is the string, not a date."""
    unquoted = load_scenario(_write(tmp_path, BASE_TEXT.replace('frozen_on: "2026-12-01"', "frozen_on: 2026-12-01")), get_kit)
    assert unquoted.scenario.frozen_on == "2026-12-01"
    assert type(unquoted.scenario.frozen_on) is str
    quoted = load_scenario(FORGE / "second-host.yaml", get_kit)
    assert unquoted.content_hash == quoted.content_hash


def test_language_no_is_norwegian_not_false(tmp_path: Path) -> None:
    """`no` is a valid BCP-47 tag (Norwegian) and must arrive as the string, never as False."""
    loaded = load_scenario(_write(tmp_path, BASE_TEXT.replace("language: en", "language: no")), get_kit)
    assert loaded.scenario.language == "no"
    assert type(loaded.scenario.language) is str
    assert loaded.document["language"] == "no"


@pytest.mark.parametrize(
    ("scalar", "expected"),
    [
        ("true", True), ("false", False),
        ("yes", "yes"), ("no", "no"), ("on", "on"), ("off", "off"), ("y", "y"), ("n", "n"),
        ("True", "True"), ("FALSE", "FALSE"),
        ("2026-01-05", "2026-01-05"), ("2026-01-05T10:00:00Z", "2026-01-05T10:00:00Z"),
        ("12", 12), ("~", None), ("null", None), ("'12'", "12"),
    ],
)
def test_only_true_and_false_are_booleans_and_dates_stay_strings(scalar: str, expected: Any) -> None:
    value = load_yaml_text(f"v: {scalar}\n", "w.yaml")["v"]
    assert value == expected
    assert type(value) is type(expected)


def test_sexagesimal_looking_scalars_stay_strings() -> None:
    """YAML 1.1 reads `22:30` as the integer 1350 (22 × 60 + 30); a document author means the string."""
    value = load_yaml_text("v: 22:30\n", "w.yaml")["v"]
    assert value == "22:30"
