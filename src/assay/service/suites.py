"""Resolving what `assay run SUITE_OR_PATH` names: a built-in suite, a suite file, a directory of
scenarios or one scenario file — and recording each scenario version in the store.

`examine_suite` loads it collecting every problem (what `assay validate` lists); `resolve_suite`
is the same loading for a run, refusing the whole on any problem."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from assay.errors import BadInput, Invalid, NotFound, Problems
from assay.scenario.load import LoadedScenario, load_scenario, parse_scenario
from assay.worlds.kits import get_kit
from assay.scenario.rubric import Rubric, load_rubric
from assay.scenario.suite import Suite, builtin_suites_dir, inside_suite, is_suite_document, parse_suite
from assay.scenario.yamlsafe import load_yaml_file


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


@dataclass(frozen=True)
class Findings:
    """What examining SUITE_OR_PATH found: the scenarios that loaded, and every problem.

    `bundle` is the suite to run, present only when there are no problems."""

    scenarios: tuple[LoadedScenario, ...]
    problems: tuple[BadInput, ...]
    bundle: SuiteBundle | None


def examine_suite(name_or_path: str) -> Findings:
    """Load what `name_or_path` names (as `resolve_suite` does), collecting every problem:
    each scenario file's own, and the suite's (its document, files it lists that are missing,
    a case id listed twice), rather than stopping at the first."""
    try:
        return _examine(name_or_path)
    except BadInput as exc:  # nothing could be loaded at all (no such file, not YAML, ...)
        return Findings((), _flat([exc]), None)


def resolve_suite(name_or_path: str) -> SuiteBundle:
    """A built-in suite by key, a suite YAML, a directory holding suite.yaml or scenarios, or one
    scenario; any problem in any of them refuses the whole (a `Problems`, one line each)."""
    found = examine_suite(name_or_path)
    if found.problems:
        raise Problems(found.problems)
    assert found.bundle is not None
    return found.bundle


def _examine(name_or_path: str) -> Findings:
    builtin = builtin_suites_dir() / name_or_path / "suite.yaml"
    if "/" not in name_or_path and not name_or_path.endswith((".yaml", ".yml")) and builtin.is_file():
        return _from_suite_file(builtin, load_yaml_file(builtin))
    path = Path(name_or_path)
    if path.is_dir():
        if (path / "suite.yaml").is_file():
            return _from_suite_file(path / "suite.yaml", load_yaml_file(path / "suite.yaml"))
        files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
        if not files:
            raise Invalid("directory holds no .yaml scenarios", "suite", value=str(path))
        problems: list[BadInput] = []
        loaded = []
        for file in files:
            one = _attempt(lambda: load_scenario(inside_suite(path, file.name, "scenario file", str(path)),
                                                 get_kit), problems)
            if one is not None:
                loaded.append(one)
        if problems:
            return Findings(tuple(loaded), tuple(problems), None)
        return Findings(tuple(loaded), (), SuiteBundle(path.name, None, None, tuple(loaded), str(path)))
    if path.is_file():
        raw = load_yaml_file(path)
        if is_suite_document(raw):
            return _from_suite_file(path, raw)
        one = parse_scenario(raw, str(path), get_kit)
        return Findings((one,), (), SuiteBundle(one.id, None, None, (one,), str(path)))
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
    loaded: list[LoadedScenario] = []
    for rel in rels:
        try:
            target = inside_suite(path.parent, rel, "scenario file", str(path))
        except BadInput as exc:
            problems.append(exc)
            continue
        if not target.is_file():
            problems.append(BadInput(f"scenario file '{rel}' not found next to the suite", str(path)))
            continue
        one = _attempt(lambda: load_scenario(target, get_kit), problems)
        if one is not None:
            loaded.append(one)
    ids = [s.id for s in loaded]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        problems.append(BadInput(f"the suite lists the same scenario id twice ({', '.join(twice)})", str(path)))
    rubric = None
    if suite is not None and suite.rubric is not None:
        target = _attempt(lambda: inside_suite(path.parent, suite.rubric, "rubric file", str(path)), problems)
        if target is None:
            pass  # refused: outside the suite's directory
        elif not target.is_file():
            problems.append(BadInput(f"rubric file '{suite.rubric}' not found next to the suite", str(path)))
        else:
            rubric = _attempt(lambda: load_rubric(target), problems)
    if problems or suite is None:
        return Findings(tuple(loaded), tuple(problems), None)
    return Findings(tuple(loaded), (), SuiteBundle(suite.key, suite.version, suite, tuple(loaded), str(path), rubric))


def _attempt(load: Callable[[], T], problems: list[BadInput]) -> T | None:
    try:
        return load()
    except BadInput as exc:
        problems.extend(_flat([exc]))
        return None


def _flat(problems: list[BadInput]) -> tuple[BadInput, ...]:
    return tuple(p for exc in problems for p in (exc.problems if isinstance(exc, Problems) else (exc,)))


def record_scenarios(store, scenarios: tuple[LoadedScenario, ...]) -> dict[str, int]:  # noqa: ANN001
    """Append each scenario version, all or none (the store refuses a frozen case whose checks
    changed). Returns case id -> version."""
    versions = store.add_scenario_versions([
        {"case_id": s.id, "content_hash": s.content_hash, "checks_hash": s.checks_hash,
         "frozen_on": s.scenario.frozen_on, "kit": s.scenario.kit, "title": s.scenario.title,
         "language": s.scenario.language, "document": s.document, "world_fingerprint": s.world_fingerprint}
        for s in scenarios
    ])
    return {s.id: v for s, v in zip(scenarios, versions)}
