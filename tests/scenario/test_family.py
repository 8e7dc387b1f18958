"""Scenario families (issue 27, item 4): a template with ${name} placeholders and a parameter table,
expanded by `assay family expand` into ordinary scenario documents.

Property tests hold the expander to its rules: deterministic, exactly one case per row, unique
ids, typed values where a placeholder is the whole string, nothing outside a placeholder touched
(keys and text alike), inserted values never read for placeholders. Every refusal is one line
naming the path. Forge 2.0's committed cases are exactly what its families expand to.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.errors import BadInput, Problems
from assay.scenario.family import expand, parse_family, placeholders, substitute
from assay.scenario.load import parse_scenario
from assay.scenario.yamlsafe import load_yaml_file
from assay.service.suites import builtin_suite_file
from assay.worlds.kits import get_kit
from tests.support.cli import run_main

REPO = Path(__file__).resolve().parents[2]
FORGE2 = builtin_suite_file("forge", "2.0").parent
FAST = settings(max_examples=60, deadline=None)


def small_family(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "family": "tiny",
        "parameters": {"case": "the id's tail", "host": "the host"},
        "template": {"id": "tiny-${case}", "title": "On ${host}", "hosts": ["${host}"], "note": "$${literal}"},
        "cases": [{"case": "a", "host": "web-01"}, {"case": "b", "host": "web-02"}],
    }
    doc.update(over)
    return doc


def lines(exc: BadInput) -> list[str]:
    return [str(p) for p in (exc.problems if isinstance(exc, Problems) else (exc,))]


# -- the rules, by example --------------------------------------------------------------------


def test_a_row_becomes_one_document_with_typed_and_spliced_values() -> None:
    fam = parse_family(small_family(template={"id": "t-${case}", "seed": "${n}", "hosts": "${hosts}",
                                              "title": "${n} hosts: ${case}", "${case}-key": True},
                                    parameters={"case": "c", "n": "a number", "hosts": "a list"},
                                    cases=[{"case": "x", "n": 7, "hosts": ["a", "b"]}]), "f.yaml")
    [case] = expand(fam, "f.yaml")
    assert case.document == {"id": "t-x", "seed": 7, "hosts": ["a", "b"], "title": "7 hosts: x", "x-key": True}
    assert expand(fam, "f.yaml") == [case]  # deterministic


def test_dollar_dollar_brace_is_a_literal_and_inserted_values_are_not_read_again() -> None:
    fam = parse_family(small_family(cases=[{"case": "a", "host": "${case}"}]), "f.yaml")
    [case] = expand(fam, "f.yaml")
    assert case.document["note"] == "${literal}"
    assert case.document["hosts"] == ["${case}"]  # a value is data, never a template


@pytest.mark.parametrize("change,expected", [
    ({"template": {"id": "tiny-${case}", "title": "${hots} ${host}"}},
     "f.yaml: template.title: placeholder ${hots} names no declared parameter (declared: case, host)"),
    ({"parameters": {"case": "c", "host": "h", "spare": "never used"}},
     "f.yaml: parameters.spare: declared but used nowhere in the template"),
    ({"cases": [{"case": "a", "host": "h", "hots": 1}]},
     "f.yaml: cases[0].hots: unknown parameter (declared: case, host)"),
    ({"cases": [{"case": "a"}]}, "f.yaml: cases[0]: sets no value for host"),
    ({"cases": [{"case": "a", "host": "h"}, {"case": "a", "host": "k"}]},
     "f.yaml: cases[1]: expands to id 'tiny-a', already the id of cases[0]; each row needs its own id"),
    ({"template": {"id": "fixed", "t": "${case} ${host}"}},
     "f.yaml: template.id: holds a placeholder (e.g. forge-disk-${case}), so every row gets its own id"),
    ({"cases": [{"case": ["a"], "host": "h"}]},
     "f.yaml: cases[0]: template.id: parameter 'case' is a list; only a placeholder that is the whole string can take one"),
    ({"extra": 1}, "f.yaml: extra: unknown field (a family has family, description, parameters, template, cases)"),
    ({"cases": []}, "f.yaml: cases: lists at least one row of parameter values"),
    ({"family": "xx"}, "f.yaml: family: 'xx' is not a family name; use 3 to 64 lowercase letters, digits and '-', "
                       "not starting or ending with '-'"),
])
def test_each_refusal_is_one_line_naming_the_path(change: dict[str, Any], expected: str) -> None:
    with pytest.raises(BadInput) as caught:
        expand(parse_family(small_family(**change), "f.yaml"), "f.yaml")
    assert expected in lines(caught.value)
    assert all("\n" not in line for line in lines(caught.value))


def test_every_problem_is_named_at_once() -> None:
    doc = small_family(parameters={"case": "c", "host": "h", "spare": "s"},
                       cases=[{"case": "a", "host": "h", "hots": 1}, {"case": "b"}])
    with pytest.raises(Problems) as caught:
        parse_family(doc, "f.yaml")
    assert len(caught.value.problems) == 4  # spare unused, cases[0] hots unknown and spare missing, cases[1]


# -- properties -------------------------------------------------------------------------------

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
PLAIN = st.text(alphabet=st.characters(blacklist_characters="$", blacklist_categories=("Cs",)), max_size=12)
SCALARS = st.one_of(PLAIN, st.integers(-10**6, 10**6), st.booleans())


@st.composite
def families(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    params = draw(st.lists(NAMES, min_size=1, max_size=4, unique=True))
    keys = draw(st.lists(PLAIN.filter(lambda k: k != "id"), min_size=1, max_size=4, unique=True))
    template: dict[str, Any] = {"id": "f-${" + params[0] + "}"}
    for i, key in enumerate(keys):
        p = params[i % len(params)]
        template[key] = draw(st.sampled_from(["${" + p + "}", "x ${" + p + "} y", ["${" + p + "}", "keep"]]))
    for p in params[len(keys):]:
        template["more-" + p] = "${" + p + "}"
    n = draw(st.integers(1, 6))
    rows = [{p: (f"id{r}" if p == params[0] else draw(SCALARS)) for p in params} for r in range(n)]
    doc = {"family": "prop", "parameters": {p: "a parameter" for p in params}, "template": template, "cases": rows}
    return doc, keys


@FAST
@given(families())
def test_expansion_is_deterministic_one_case_per_row_with_unique_ids(drawn: tuple[dict[str, Any], list[str]]) -> None:
    doc, _ = drawn
    before = copy.deepcopy(doc)
    fam = parse_family(doc, "p.yaml")
    first, again = expand(fam, "p.yaml"), expand(parse_family(copy.deepcopy(doc), "p.yaml"), "p.yaml")
    assert first == again
    assert [c.row for c in first] == list(range(len(doc["cases"])))
    assert len({c.id for c in first}) == len(first)
    assert doc == before  # the family document itself is never changed


@FAST
@given(families())
def test_nothing_outside_a_placeholder_changes(drawn: tuple[dict[str, Any], list[str]]) -> None:
    doc, keys = drawn
    fam = parse_family(doc, "p.yaml")
    for case in expand(fam, "p.yaml"):
        row = doc["cases"][case.row]
        assert set(case.document) == set(doc["template"])  # keys without placeholders stay as written
        for key, shape in doc["template"].items():
            got = case.document[key]
            if key == "id":
                assert got == shape.replace(shape[shape.index("${"):], str(row[shape[4:-1]]))
            elif isinstance(shape, list):
                assert got[1] == "keep" and got[0] == row[re.match(r"\$\{(\w+)\}", shape[0]).group(1)]
            elif shape.startswith("x "):
                name = re.search(r"\$\{(\w+)\}", shape).group(1)
                value = row[name]
                text = ("true" if value else "false") if isinstance(value, bool) else str(value)
                assert got == f"x {text} y"
            else:
                assert got == row[shape[2:-1]]


@FAST
@given(st.recursive(st.one_of(PLAIN, st.integers(), st.booleans(), st.none()),
                    lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(PLAIN, kids, max_size=3)),
                    max_leaves=12))
def test_a_template_without_placeholders_is_returned_as_is(node: Any) -> None:
    assert placeholders(node) == set()
    assert substitute(node, {}, "cases[0]") == node


# -- the command ------------------------------------------------------------------------------


def test_expand_writes_ordinary_case_files_that_validate_with_the_same_hash(tmp_path: Path) -> None:
    family = FORGE2 / "families" / "upstream.yaml"
    code, out, err = run_main(["family", "expand", str(family), "-o", str(tmp_path / "cases"), "--json"], cwd=REPO)
    assert code == 0, err
    import json

    listed = json.loads(out)["cases"]
    assert len(listed) == 5
    for case in listed:
        loaded = parse_scenario(load_yaml_file(case["file"]), case["file"], get_kit)
        assert loaded.id == case["id"] and loaded.content_hash == case["hash"]
        code, out, err = run_main(["validate", case["file"], "--json"], cwd=REPO, env={"ASSAY_DB": f"sqlite:///{tmp_path}/none.db"})
        assert code == 0 and json.loads(out)["scenarios"][0]["hash"] == case["hash"], err


def test_a_bad_family_writes_nothing_and_exits_2(tmp_path: Path) -> None:
    bad = small_family(cases=[{"case": "a", "host": "h", "hots": 1}])
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    code, out, err = run_main(["family", "expand", str(path), "-o", str(tmp_path / "out")], cwd=REPO)
    assert code == 2 and "cases[0].hots: unknown parameter" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_a_case_that_does_not_validate_is_named_by_its_row_and_id(tmp_path: Path) -> None:
    doc = load_yaml_file(FORGE2 / "families" / "quiet.yaml")
    doc["cases"][1]["role"] = "Not A Slug"
    path = tmp_path / "quiet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    code, _, err = run_main(["family", "expand", str(path)], cwd=REPO)
    assert code == 2
    assert re.search(r"quiet\.yaml cases\[1\] \(forge2-quiet-vacuum\): world\.hosts\[0\]\.role", err), err


# -- forge 2.0 is its families, expanded ------------------------------------------------------


def test_forge_two_cases_are_exactly_their_families_expanded(tmp_path: Path) -> None:
    families = sorted((FORGE2 / "families").glob("*.yaml"))
    assert len(families) >= 8
    suite = load_yaml_file(FORGE2 / "suite.yaml")
    listed = {Path(p).name for p in suite["scenarios"]}
    produced: set[str] = set()
    for family in families:
        fam = parse_family(load_yaml_file(family), str(family))
        cases = expand(fam, str(family))
        assert len(cases) >= 5, family.name
        for case in cases:
            committed = load_yaml_file(FORGE2 / "cases" / f"{case.id}.yaml")
            assert committed == case.document, f"{case.id}: expand {family.name} again (assay family expand -o cases)"
            produced.add(f"{case.id}.yaml")
    assert produced == listed and len(listed) >= 55
    assert {p.name for p in (FORGE2 / "cases").glob("*.yaml")} == listed  # no stale case file left behind


def test_a_released_case_whose_checks_changed_is_refused_as_validate_refuses_it(tmp_path: Path) -> None:
    """Expanding again after editing a family's checks is held to the store's releases, as
    `assay validate` holds a hand-written case: a frozen case's checks never change."""
    env = {"ASSAY_DB": f"sqlite:///{tmp_path}/s.db", "PATH": "/usr/bin:/bin"}
    doc = load_yaml_file(FORGE2 / "families" / "quiet.yaml")
    doc["template"]["id"] = "mine-quiet-${case}"
    doc["cases"] = doc["cases"][:1]
    family = tmp_path / "quiet.yaml"
    family.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    suite = tmp_path / "suite"
    assert run_main(["family", "expand", str(family), "-o", str(suite)], cwd=REPO, env=env)[0] == 0
    (suite / "suite.yaml").write_text('key: mine\nversion: "1.0"\ntitle: Mine\nlanguage: en\n'
                                      "scenarios: [mine-quiet-etl.yaml]\n", encoding="utf-8")
    code, _, err = run_main(["suite", "release", str(suite)], cwd=REPO, env=env)
    assert code == 0, err
    doc["template"]["checks"][0]["weight"], doc["template"]["checks"][1]["weight"] = 40, 35
    family.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    before = (suite / "mine-quiet-etl.yaml").read_text(encoding="utf-8")
    code, _, err = run_main(["family", "expand", str(family), "-o", str(suite)], cwd=REPO, env=env)
    assert code == 2 and "case mine-quiet-etl is frozen" in err and "a changed check needs a new case id" in err, err
    assert (suite / "mine-quiet-etl.yaml").read_text(encoding="utf-8") == before  # nothing written
