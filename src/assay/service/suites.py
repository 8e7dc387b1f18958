"""Resolving what `assay run SUITE_OR_PATH` names: a built-in suite, a suite file, a directory of
scenarios or one scenario file — and recording each scenario version in the store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from assay.errors import BadInput
from assay.scenario.load import LoadedScenario, load_scenario
from assay.scenario.suite import Suite, builtin_suites_dir, is_suite_document, parse_suite
from assay.scenario.yamlsafe import load_yaml_file


@dataclass(frozen=True)
class SuiteBundle:
    key: str
    version: str | None
    suite: Suite | None
    scenarios: tuple[LoadedScenario, ...]
    source: str

    def scenario_hashes(self) -> dict[str, str]:
        return {s.id: s.content_hash for s in self.scenarios}


def builtin_suite_names() -> list[str]:
    return sorted(p.parent.name for p in builtin_suites_dir().glob("*/suite.yaml"))


def _from_suite_file(path: Path) -> SuiteBundle:
    raw = load_yaml_file(path)
    suite = parse_suite(raw, str(path))
    loaded = []
    for rel in suite.scenarios:
        target = (path.parent / rel).resolve()
        if not target.is_file():
            raise BadInput(f"scenario file '{rel}' not found next to the suite", str(path))
        loaded.append(load_scenario(target))
    ids = [s.id for s in loaded]
    if len(set(ids)) != len(ids):
        raise BadInput("the suite lists the same scenario id twice", str(path))
    return SuiteBundle(suite.key, suite.version, suite, tuple(loaded), str(path))


def resolve_suite(name_or_path: str) -> SuiteBundle:
    """A built-in suite by key, a suite YAML, a directory holding suite.yaml or scenarios, or one scenario."""
    builtin = builtin_suites_dir() / name_or_path / "suite.yaml"
    if "/" not in name_or_path and not name_or_path.endswith((".yaml", ".yml")) and builtin.is_file():
        return _from_suite_file(builtin)
    path = Path(name_or_path)
    if path.is_dir():
        if (path / "suite.yaml").is_file():
            return _from_suite_file(path / "suite.yaml")
        files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
        if not files:
            raise BadInput("directory holds no .yaml scenarios", str(path))
        loaded = tuple(load_scenario(f) for f in files)
        return SuiteBundle(path.name, None, None, loaded, str(path))
    if path.is_file():
        raw = load_yaml_file(path)
        if is_suite_document(raw):
            return _from_suite_file(path)
        one = load_scenario(path)
        return SuiteBundle(one.id, None, None, (one,), str(path))
    known = ", ".join(builtin_suite_names())
    raise BadInput(f"no built-in suite or file by that name (built-in suites: {known})", name_or_path)


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
