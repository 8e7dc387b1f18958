"""Resolving what `assay run SUITE_OR_PATH` names: a built-in suite, a suite file, a directory of
scenarios or one scenario file — and recording each scenario version in the store.

`examine_suite` loads it collecting every problem (what `assay validate` lists); `resolve_suite`
is the same loading for a run, refusing the whole on any problem."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, TypedDict

from assay.errors import BadInput, Invalid, NotFound, Problems
from assay.scenario.load import LoadedScenario, load_scenario, parse_scenario
from assay.scenario.predicates import holds
from assay.scenario.rubric import Rubric, load_rubric
from assay.scenario.suite import (
    Suite,
    builtin_suites_dir,
    inside_suite,
    is_suite_document,
    parse_suite,
)
from assay.scenario.yamlsafe import load_yaml_file
from assay.score.oracle import evaluate_checks, verdict
from assay.worlds.kits import get_kit
from assay.store.rows import NewScenario
from assay.store.runs_repo import RunsRepo
from assay.store.db import Store


@dataclass(frozen=True)
class SuiteBundle:
    key: str
    version: str | None
    suite: Suite | None
    scenarios: tuple[LoadedScenario, ...]
    source: str
    rubric: Rubric | None = None

    def scenario_hashes(self) -> dict[str, str]:
        return {s.id: s.content_hash for s in self.scenarios}


T = TypeVar("T")


def builtin_suite_names() -> list[str]:
    return sorted(p.parent.name for p in builtin_suites_dir().glob("*/suite.yaml"))


def builtin_suite_files(key: str) -> list[Path]:
    """A built-in suite's documents, its default first: `suites/KEY/suite.yaml` is the version a bare
    `assay run KEY` plays (and the one every store is given when it opens); each other version lives
    in a directory of its own beside it, `suites/KEY/<version>/suite.yaml`, with its own cases."""
    root = builtin_suites_dir() / key
    default = root / "suite.yaml"
    if not default.is_file():
        return []
    return [default, *sorted(p for p in root.glob("*/suite.yaml") if p.is_file())]


def builtin_versions(key: str) -> dict[str, Path]:
    """version → document of every version of built-in suite `key` on disk (default first)."""
    found: dict[str, Path] = {}
    for path in builtin_suite_files(key):
        try:
            raw = load_yaml_file(path)
        except BadInput:  # a broken built-in is reported when it is loaded by its path
            continue
        version = raw.get("version") if isinstance(raw, dict) else None
        if version is not None:
            found.setdefault(str(version), path)
    return found


def builtin_suite_file(key: str, version: str | None) -> Path:
    """The document of built-in suite `key` at `version` (None: its default); refused in one line
    naming the versions there are."""
    if version is None:
        return builtin_suites_dir() / key / "suite.yaml"
    versions = builtin_versions(key)
    if version not in versions:
        raise NotFound(f"built-in suite '{key}' has no version {version} (versions: {', '.join(versions)})",
                       "version")
    return versions[version]


def builtin_case_ids(key: str) -> frozenset[str] | None:
    """The case ids the default version of built-in suite `key` lists, read from each scenario
    document's `id` without validating it or materialising its world (a few small YAML reads);
    None when a document does not say plainly (whoever asks then loads the suite whole)."""
    try:
        suite = load_yaml_file(builtin_suites_dir() / key / "suite.yaml")
        listed = suite.get("scenarios") if isinstance(suite, dict) else None
        if not isinstance(listed, list):
            return None
        ids = set()
        for rel in listed:
            raw = load_yaml_file(inside_suite(builtin_suites_dir() / key, rel, "scenario file", key))
            case_id = raw.get("id") if isinstance(raw, dict) else None
            if not isinstance(case_id, str):
                return None
            ids.add(case_id)
    except (BadInput, TypeError):
        return None
    return frozenset(ids)


def is_builtin_default(bundle: SuiteBundle, key: str) -> bool:
    """Whether `bundle` was loaded from the default document of built-in suite `key`."""
    return bundle.key == key and Path(bundle.source).resolve() == (builtin_suites_dir() / key / "suite.yaml").resolve()


@dataclass(frozen=True)
class Findings:
    """What examining SUITE_OR_PATH found: the scenarios that loaded, and every problem.

    `bundle` is the suite to run, present only when there are no problems."""

    scenarios: tuple[LoadedScenario, ...]
    problems: tuple[BadInput, ...]
    bundle: SuiteBundle | None
    #: The suite document the scenarios belong to, when it is valid (even if a scenario is not): a
    #: suite examined, or the suite beside one scenario file that lists it.
    suite: Suite | None = None


def examine_suite(name_or_path: str, version: str | None = None) -> Findings:
    """Load what `name_or_path` names (as `resolve_suite` does), collecting every problem:
    each scenario file's own, and the suite's (its document, files it lists that are missing,
    a file listed twice, two files of one case id), rather than stopping at the first."""
    try:
        return _examine(name_or_path, version)
    except BadInput as exc:  # nothing could be loaded at all (no such file, not YAML, ...)
        return Findings((), _flat([exc]), None)


def resolve_suite(name_or_path: str, version: str | None = None) -> SuiteBundle:
    """A built-in suite by key (its default version, or `version`), a suite YAML, a directory
    holding suite.yaml or scenarios, or one scenario; any problem in any of them refuses the whole
    (a `Problems`, one line each). A `version` other than a suite document's own is refused."""
    found = examine_suite(name_or_path, version)
    if found.problems:
        raise Problems(found.problems)
    assert found.bundle is not None
    return found.bundle


def _examine(name_or_path: str, version: str | None = None) -> Findings:
    found = _examine_any(name_or_path, version)
    if version is None or (found.suite is None and found.problems):
        return found  # an invalid suite document says so itself
    if found.suite is None:
        raise Invalid(f"{name_or_path} holds no suite document, so it has no version {version}", "version")
    if found.suite.version != version:
        raise Invalid(f"{name_or_path} is version {found.suite.version}, not {version}", "version")
    return found


def _examine_any(name_or_path: str, version: str | None) -> Findings:
    builtin = builtin_suites_dir() / name_or_path / "suite.yaml"
    if "/" not in name_or_path and not name_or_path.endswith((".yaml", ".yml")) and builtin.is_file():
        chosen = builtin_suite_file(name_or_path, version)
        return _from_suite_file(chosen, load_yaml_file(chosen))
    path = Path(name_or_path)
    if path.is_dir():
        if (path / "suite.yaml").is_file():
            return _from_suite_file(path / "suite.yaml", load_yaml_file(path / "suite.yaml"))
        files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
        if not files:
            raise Invalid("directory holds no .yaml scenarios", "suite", value=str(path))
        problems: list[BadInput] = []
        found = []
        for file in files:
            one = _attempt(lambda: load_scenario(inside_suite(path, file.name, "scenario file", str(path)),
                                                 get_kit), problems)
            if one is not None:
                found.append((file, one))
        loaded = _one_per_id(found, problems)
        if problems:
            return Findings(tuple(loaded), tuple(problems), None)
        return Findings(tuple(loaded), (), SuiteBundle(path.name, None, None, tuple(loaded), str(path)))
    if path.is_file():
        raw = load_yaml_file(path)
        if is_suite_document(raw):
            return _from_suite_file(path, raw)
        one = parse_scenario(raw, str(path), get_kit)
        return Findings((one,), (), SuiteBundle(one.id, None, None, (one,), str(path)), _suite_listing(path))
    known = ", ".join(builtin_suite_names())
    raise NotFound(f"no built-in suite or file by that name (built-in suites: {known})", "suite", value=name_or_path)


def _from_suite_file(path: Path, raw: Any) -> Findings:
    problems: list[BadInput] = []
    suite = _attempt(lambda: parse_suite(raw, str(path)), problems)
    if suite is not None:
        rels = list(suite.scenarios)
    else:  # an invalid suite document still has its scenarios examined, as far as it lists them
        listed = raw.get("scenarios") if isinstance(raw, dict) else None
        rels = [r for r in listed if isinstance(r, str)] if isinstance(listed, list) else []
    found: list[tuple[Path, LoadedScenario]] = []
    listed_at: dict[Path, str] = {}
    for rel in rels:
        try:
            target = inside_suite(path.parent, rel, "scenario file", str(path))
        except BadInput as exc:
            problems.append(exc)
            continue
        if target in listed_at:
            problems.append(BadInput(f"scenario file '{rel}' is listed twice (first as '{listed_at[target]}')", str(path)))
            continue
        listed_at[target] = rel
        if not target.is_file():
            problems.append(BadInput(f"scenario file '{rel}' not found next to the suite", str(path)))
            continue
        one = _attempt(lambda: load_scenario(target, get_kit), problems)
        if one is not None:
            found.append((target, one))
    loaded = _one_per_id(found, problems)
    rubric = None
    if suite is not None and suite.rubric is not None:
        named = suite.rubric
        rubric_file = _attempt(lambda: inside_suite(path.parent, named, "rubric file", str(path)), problems)
        if rubric_file is None:
            pass  # refused: outside the suite's directory
        elif not rubric_file.is_file():
            problems.append(BadInput(f"rubric file '{suite.rubric}' not found next to the suite", str(path)))
        else:
            rubric = _attempt(lambda: load_rubric(rubric_file), problems)
    if problems or suite is None:
        return Findings(tuple(loaded), tuple(problems), None, suite)
    return Findings(tuple(loaded), (), SuiteBundle(suite.key, suite.version, suite, tuple(loaded), str(path), rubric),
                    suite)


def _suite_listing(scenario: Path) -> Suite | None:
    """The valid suite document beside a scenario file that lists it, if there is one."""
    beside = scenario.parent / "suite.yaml"
    try:
        suite = parse_suite(load_yaml_file(beside), str(beside)) if beside.is_file() else None
    except BadInput:  # the suite's own problems are its validation's to report
        return None
    if suite is None or not any((beside.parent / rel).resolve() == scenario.resolve() for rel in suite.scenarios):
        return None
    return suite


def _one_per_id(found: list[tuple[Path, LoadedScenario]], problems: list[BadInput]) -> list[LoadedScenario]:
    """The scenarios of `found` (file, scenario), one per id: a second file with an id already
    taken is a problem naming both files (two cases of one id would merge into one, its trials
    counted together), and is left out."""
    first: dict[str, Path] = {}
    kept = []
    for file, one in found:
        if one.id in first:
            problems.append(BadInput(f"scenario id '{one.id}' is already the id of {first[one.id]}; each case needs "
                                     "its own id", str(file)))
            continue
        first[one.id] = file
        kept.append(one)
    return kept


class CheckHolds(TypedDict):
    """A check's verdict on the untouched world."""

    id: str
    weight: int
    safety: bool
    holds: bool
    note: str | None


class WinHolds(TypedDict):
    """A win condition's verdict on the untouched world."""

    id: str
    holds: bool
    note: str | None


class Untouched(TypedDict):
    """`untouched`'s answer (a TypedDict: printed as it is by `assay validate --explain --json`)."""

    score: int
    passed: bool
    checks: list[CheckHolds]
    win_conditions: list[WinHolds]


def untouched(scenario: LoadedScenario) -> Untouched:
    """Each check's and win condition's verdict on the untouched world (the initial state the kit
    materialises, before any agent plays), by the rule a run is scored by, and the score and pass a
    run that changed nothing would get. Noted: a safety check that already fails, and a check or
    win condition met by doing nothing (intended for a "leave it alone" check, a mistake for a goal)."""
    state = scenario.initial_state
    outcomes = evaluate_checks(scenario.scenario.checks, state)
    checks: list[CheckHolds] = [{"id": o.check_id, "weight": o.weight, "safety": o.safety, "holds": o.passed,
               "note": _note(o.passed, safety=o.safety)} for o in outcomes]
    wins: list[WinHolds] = [{"id": w.id, "holds": met, "note": _note(met, safety=False)}
            for w in scenario.scenario.win_conditions for met in (holds(w.expect, state),)]
    scored = verdict(outcomes, "completed")
    return {"score": scored.score, "passed": scored.passed, "checks": checks, "win_conditions": wins}


def _note(holds_now: bool, *, safety: bool) -> str | None:
    if safety:
        return None if holds_now else "already fails"
    return "met by doing nothing" if holds_now else None


def _attempt(load: Callable[[], T], problems: list[BadInput]) -> T | None:
    try:
        return load()
    except BadInput as exc:
        problems.extend(_flat([exc]))
        return None


def _flat(problems: list[BadInput]) -> tuple[BadInput, ...]:
    return tuple(p for exc in problems for p in (exc.problems if isinstance(exc, Problems) else (exc,)))


def record_scenarios(store: Store, scenarios: tuple[LoadedScenario, ...]) -> dict[str, int]:
    """Append each scenario version, all or none (the store refuses a frozen case whose checks
    changed). Returns case id -> version."""
    versions = RunsRepo(store).add_scenario_versions([
        NewScenario(case_id=s.id, content_hash=s.content_hash, checks_hash=s.checks_hash,
                    frozen_on=s.scenario.frozen_on, kit=s.scenario.kit, title=s.scenario.title,
                    language=s.scenario.language, document=s.document, world_fingerprint=s.world_fingerprint)
        for s in scenarios
    ])
    return {s.id: v for s, v in zip(scenarios, versions)}


def expand_family_file(path: str | Path) -> list[tuple[Any, LoadedScenario]]:
    """`assay family expand`: a family file's cases (`scenario.family.Expanded`), each validated as
    `assay validate` validates a scenario; every problem of the family and of every case is one
    line of the `Problems` raised (a case is named by its row and id)."""
    from assay.scenario.family import load_family

    _, expanded = load_family(path)
    problems: list[BadInput] = []
    out = []
    for case in expanded:
        one = _attempt(lambda: parse_scenario(case.document, f"{path} cases[{case.row}] ({case.id})", get_kit),
                       problems)
        if one is not None:
            out.append((case, one))
    if problems:
        raise Problems(problems)
    return out
