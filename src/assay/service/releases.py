"""Suite releases: validate a suite document, pin every scenario's content hash, never change it.

A release is `(key, version)` plus exactly what every submitter to it will run: the content hash
of each scenario version, reps per scenario, language, visibility, judge and facilitator config.
Releasing the same `(key, version)` again is accepted only if nothing differs (it is then the
same release); any difference is refused with a pointer to a new version. Older releases keep
resolving to the documents they pinned (read back from the store, not from disk), so they stay
re-runnable byte for byte — unless the world kit itself changed, which changes the hash and is
refused rather than run on different content.

Built-in suites (`assay/suites/*/suite.yaml`) are released by `bootstrap`, once per store and
version, when the store is opened for a command (`assay.cli.ui.open_store_at`; the web app will do the
same at start-up): reading a release never writes one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from assay.canonical import canonical_hash
from assay.errors import BadInput, Conflict, Forbidden, Invalid, NotFound, Problems
from assay.jsontypes import JsonObject
from assay.languages import bcp47
from assay.scenario.load import LoadedScenario, parse_scenario
from assay.scenario.rubric import Rubric, rubric_hash
from assay.scenario.suite import Baseline, JudgeConfig, Suite, builtin_suites_dir
from assay.scenario.yamlsafe import load_yaml_file
from assay.service.actors import PUBLIC, Actor, is_listed, may_see, require_staff
from assay.service.suites import (
    Findings,
    SuiteBundle,
    builtin_case_ids,
    builtin_suite_names,
    builtin_versions,
    is_builtin_default,
    record_scenarios,
    resolve_suite,
)
from assay.store.releases_repo import AnyRelease, NewPin, NewRelease, ReleaseRow, ReleasesRepo
from assay.store.db import Store
from assay.worlds.kits import get_kit

__all__ = ["AnyRelease", "ReleaseRow"]  # the read model (store/releases_repo.py), re-exported where its readers look

#: The owner recorded for built-in suites: the platform operator's account name.
BUILTIN_OWNER = "operator"
HASH_PREFIX = 12


def normalise_language(tag: str, where: str) -> str:
    """The canonical tag by the one rule (`assay.languages`), refused as a domain error naming `where`."""
    try:
        return bcp47(tag)
    except ValueError as exc:
        raise Invalid(str(exc), "language", value=where) from None


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


@dataclass(frozen=True)
class PreparedRelease:
    """A release computed from documents, not yet stored."""

    row: NewRelease
    bundle: SuiteBundle


def prepare(bundle: SuiteBundle, *, builtin: bool = False) -> PreparedRelease:
    """Validate a suite bundle for release and compute the row that pins it (no writes)."""
    suite = bundle.suite
    if suite is None:
        raise Invalid("a release needs a suite document (key, version, scenarios, …), not bare scenarios",
                      "suite", value=bundle.source)
    language = normalise_language(suite.language, f"{bundle.source}: language")
    mismatched: list[BadInput] = []
    for s in bundle.scenarios:
        theirs = normalise_language(s.scenario.language, s.id)
        if theirs != language:
            mismatched.append(Invalid(f"scenario language '{theirs}' does not match the suite language '{language}'",
                                      "language", value=s.id))
        # a campaign is played in its own language, which must be the suite's too
        played = getattr(s.world_spec, "campaign_language", None)
        if played is not None and normalise_language(played, s.id) != language:
            mismatched.append(Invalid(f"campaign_language '{played}' does not match the suite language '{language}'",
                                      "campaign_language", value=s.id))
    if mismatched:
        raise mismatched[0] if len(mismatched) == 1 else Problems(mismatched)
    owner = suite.owner or (BUILTIN_OWNER if builtin else None)
    judge, rubric = _judging(bundle)
    document = suite.model_dump(mode="json")
    document.pop("scenarios")
    document["judge"] = judge
    # a suite without a rubric hashes as it did before rubrics existed; one with a rubric pins the
    # rubric's content (not its file name)
    document.pop("rubric")
    if rubric is not None:
        document["rubric"] = rubric_hash(rubric)
    # likewise a suite that maps no trait to a panel category hashes as it did before the mapping
    # existed; one that does pins the mapping
    if document.get("panel_categories") is None:
        document.pop("panel_categories", None)
    else:
        _check_panel_categories(document["panel_categories"], rubric, bundle.source)
    pinned = [{"case_id": s.id, "scenario_hash": s.content_hash} for s in bundle.scenarios]
    release_hash = canonical_hash({"suite": {**document, "language": language, "owner": owner}, "scenarios": pinned})
    row: NewRelease = {
        "suite_key": suite.key,
        "version": suite.version,
        "title": suite.title,
        "language": language,
        "visibility": suite.visibility,
        "reps_per_scenario": suite.reps_per_scenario,
        "facilitator_model": suite.facilitator_model,
        "judge": judge,
        "rubric": rubric.document() if rubric is not None else None,
        "rubric_hash": rubric_hash(rubric) if rubric is not None else None,
        "baselines": [b.model_dump(mode="json") for b in suite.baselines],
        "known_limitations": list(suite.known_limitations),
        "card": suite.card,
        "owner": owner,
        "document": {**document, "scenarios": [s.id for s in bundle.scenarios]},
        "release_hash": release_hash,
        "builtin": builtin,
    }
    return PreparedRelease(row, bundle)


def _check_panel_categories(mapping: dict[str, str], rubric: Rubric | None, where: str) -> None:
    """Every mapped trait is one of the rubric's, every category one of the panel's taxonomy."""
    if rubric is None:
        raise Invalid("panel_categories maps traits, but the suite has no trait rubric", "panel_categories",
                      value=where)
    from assay.service.panel import taxonomy  # lazy: start-up cost (the panel's models), off `assay run`'s path

    known = {c.slug for c in taxonomy()}
    for trait, category in mapping.items():
        if trait not in rubric.keys:
            raise Invalid(f"'{trait}' is not a trait of the suite's rubric", "panel_categories", value=where)
        if category not in known:
            raise Invalid(f"'{category}' is not a panel category (see panel_categories.yaml)", "panel_categories",
                          value=where)


def panel_categories(release: ReleaseRow) -> dict[str, str]:
    """{trait: panel category} a release maps for judge–panel agreement ({} when it maps none)."""
    mapping = release["document"].get("panel_categories")
    return {str(k): str(v) for k, v in mapping.items()} if isinstance(mapping, dict) else {}


def _judging(bundle: SuiteBundle) -> tuple[JsonObject | None, Rubric | None]:
    """The judge config and rubric a release pins. A rubric without a judge is judged by `rules`,
    which needs evidence for every trait; a judge without a rubric is pinned as declared and has
    nothing to judge (an oracle suite)."""
    suite, rubric = bundle.suite, bundle.rubric
    assert suite is not None
    if rubric is None:
        return (suite.judge.model_dump(mode="json") if suite.judge else None), None
    judge = suite.judge or JudgeConfig(model="rules")
    if judge.model == "rules":
        from assay.score.judge import RulesJudge  # lazy: start-up cost, for suites with a rubric only

        RulesJudge().check(rubric)
    return judge.model_dump(mode="json"), rubric


def _differences(existing: ReleaseRow, row: NewRelease) -> list[str]:
    fields = ("title", "language", "visibility", "reps_per_scenario", "facilitator_model", "judge", "rubric",
              "baselines", "known_limitations", "card", "owner")
    return [f for f in fields if existing.get(f) != row.get(f)]


@dataclass(frozen=True, slots=True)
class _Pinned:
    """A scenario as a release pinned it: what `release_problems` holds a case's document to."""

    suite_key: str
    version: str
    scenario_hash: str
    frozen_on: str | None
    document: JsonObject  # the pinned scenario document, as stored


def release_problems(found: Findings, store: Store | None) -> list[BadInput]:
    """What `suite release` (and, for a frozen case, `run`) would refuse of what `assay validate`
    found, beyond each document's own problems; one line each, and nothing is written.

    - A suite whose documents are sound is prepared as a release would be (its scenarios in its
      language, its rubric judgeable, its panel categories known).
    - With a `store` (one that exists: validating never creates one), each case is held to every
      release that pinned it: a frozen case whose checks differ from a released version's is
      refused (a changed check needs a new case id), and so is a case that differs from what the
      release of this very suite version pinned (releases are immutable).
    """
    problems: list[BadInput] = []
    if found.bundle is not None and found.bundle.suite is not None:
        try:
            prepare(found.bundle)
        except BadInput as exc:
            problems.extend(exc.problems if isinstance(exc, Problems) else (exc,))
    if store is None or not found.scenarios:
        return problems
    repo = ReleasesRepo(store)
    pins: dict[str, list[_Pinned]] = {}
    for release in repo.releases():  # oldest first: the first release that froze a case names it
        for pin in repo.release_scenarios(release["id"]):
            pins.setdefault(pin.case_id, []).append(
                _Pinned(release["suite_key"], release["version"], pin.scenario_hash, pin.frozen_on, pin.document))
    suite = found.suite
    for s in found.scenarios:
        for p in pins.get(s.id, ()):
            if p.scenario_hash == s.content_hash:
                continue
            named = f"suite {p.suite_key} {p.version}"
            if p.frozen_on is not None and canonical_hash(p.document["checks"]) != s.checks_hash:
                problems.append(BadInput(
                    f"case {s.id} is frozen (since {p.frozen_on}, released in {named}) and its checks changed; "
                    "a changed check needs a new case id", s.source or s.id))
                break
            if suite is not None and (p.suite_key, p.version) == (suite.key, suite.version):
                problems.append(BadInput(
                    f"case {s.id} differs from what {named}, already released, pinned "
                    f"({p.scenario_hash[:HASH_PREFIX]} → {s.content_hash[:HASH_PREFIX]}); releases are "
                    "immutable: give the suite a new version", s.source or s.id))
                break
    return problems


def store_release(store: Store, prepared: PreparedRelease) -> tuple[ReleaseRow, bool]:
    """Record the scenario versions and the release; refuse a changed re-release. (release, created)."""
    repo = ReleasesRepo(store)
    row = prepared.row
    key, version = row["suite_key"], row["version"]

    def refuse(existing: ReleaseRow) -> None:
        if existing["release_hash"] == row["release_hash"]:
            return
        stored = {r.case_id: r.scenario_hash for r in repo.release_scenarios(existing["id"])}
        mine = {s.id: s.content_hash for s in prepared.bundle.scenarios}
        changed = sorted(c for c in set(stored) | set(mine) if stored.get(c) != mine.get(c))
        fields = _differences(existing, row)
        what = ", ".join([*(f"scenario {c}" for c in changed), *fields]) or "its content"
        raise Conflict(
            f"suite {key} {version} is already released and this document differs ({what}); releases are "
            f"immutable: give the suite a new version and release that", "version")

    existing = repo.release(key, version)
    if existing is not None:  # decide before writing anything, so a refusal stores nothing
        refuse(existing)
        return existing, False
    versions = record_scenarios(store, prepared.bundle.scenarios)
    pinned: list[NewPin] = [{"case_id": s.id, "scenario_hash": s.content_hash, "scenario_version": versions[s.id]}
                            for s in prepared.bundle.scenarios]
    return repo.add_release(row, pinned, refuse)


def release_path(store: Store, path: str, *, actor: Actor) -> tuple[ReleaseRow, bool]:
    """`assay suite release PATH`: the platform's staff release suites."""
    require_staff(actor, "release a suite", "path")
    target = Path(path)
    if not target.exists():
        raise NotFound("no such file or directory", "path", value=path)
    prepared = prepare(resolve_suite(path), builtin=_is_builtin_path(target))
    refuse_reserved_key(prepared.row["suite_key"], target)
    return store_release(store, prepared)


def refuse_reserved_key(key: str, path: Path) -> None:
    """The keys of the built-in suites (forge, academy, …) are theirs: a suite with such a key is
    released only from the built-in documents themselves, never from a file of the user's (which
    would otherwise become the board's current version of the built-in suite)."""
    if key in builtin_suite_names() and not _is_builtin_path(path, key):
        raise Forbidden(f"suite key '{key}' is reserved for the built-in suite of that name, which is released "
                        "from its own documents only; give your suite another key", "path", value=str(path))


def _is_builtin_path(path: Path, key: str | None = None) -> bool:
    """Whether `path` lies among the built-in suites' documents (those of suite `key`, if given)."""
    root = builtin_suites_dir() / key if key is not None else builtin_suites_dir()
    return path.resolve().is_relative_to(root.resolve())


def builtin_prepared(key: str, version: str | None = None) -> PreparedRelease | None:
    """The release of built-in suite `key` at `version` (None: its default), prepared from its
    documents; None when there is no such built-in suite or version."""
    if key not in builtin_suite_names() or (version is not None and version not in builtin_versions(key)):
        return None
    return prepare(resolve_suite(key, version), builtin=True)


def _builtin_version(key: str) -> str | None:
    """The version a built-in suite's document declares, read without materialising its worlds."""
    try:
        document = load_yaml_file(builtin_suites_dir() / key / "suite.yaml")
    except Exception:  # noqa: BLE001 - a broken built-in is reported when it is released
        return None
    version = document.get("version") if isinstance(document, dict) else None
    return str(version) if version is not None else None


def bootstrap(store: Store, needed: SuiteBundle | None = None) -> list[tuple[str, str]]:
    """Release every built-in suite's default version this store does not hold yet; what was
    released. (A built-in's other versions, `suites/KEY/<version>/`, are released when first named:
    `assay submit KEY --version V`, `assay suite release PATH`.)

    Cheap when there is nothing to do (one small YAML read and one query per built-in suite), so
    it can run whenever a store is opened; the suite is loaded and pinned only when its version is
    new to the store.

    With `needed` (the suite `assay run` is about to play), only the built-in suites that list one
    of its case ids are released: the frozen rule binds a case from its first release, and these
    are the releases that can bind the cases of this run (the next command that opens the store
    without `needed` releases the rest). A built-in suite that `needed` itself is (its default
    document) is released from it, not loaded a second time."""
    done: list[tuple[str, str]] = []
    repo = ReleasesRepo(store)
    playing = frozenset(s.id for s in needed.scenarios) if needed is not None else frozenset()
    for key in builtin_suite_names():
        declared = _builtin_version(key)
        if declared is not None and repo.release(key, declared) is not None:
            continue
        if needed is not None and is_builtin_default(needed, key):
            prepared: PreparedRelease | None = prepare(needed, builtin=True)
        elif needed is not None and (listed := builtin_case_ids(key)) is not None and not listed & playing:
            continue  # none of the run's cases is this suite's: nothing of it can bind them
        else:
            prepared = builtin_prepared(key)
        if prepared is not None and repo.release(key, prepared.row["version"]) is None:
            store_release(store, prepared)
            done.append((key, prepared.row["version"]))
    return done


# -- resolving releases -----------------------------------------------------------------------


def find_release(
    store: Store, key: str, version: str | None, *, public: bool = False, actor: Actor,
) -> ReleaseRow:
    """The release a command names. Without a version: the latest (public ones only if `public`).

    `public=True` is how the public surfaces (board, card) resolve: internal suites do not exist
    there, unlisted versions only when named, and the default is the latest public version. Anyone
    but the platform's staff only ever resolves that way.
    """
    public = public or not actor.is_staff
    releases = ReleasesRepo(store).releases(key)
    hint = ""
    if version is not None and version in builtin_versions(key):  # built in, not yet released here
        hint = f" in this store (it is built in: `assay submit {key} --version {version}` releases it)"
    unknown = NotFound(f"no released suite '{key}'" + (f" version {version}" if version else "") + hint,
                       "version" if version else "suite")
    if public:
        releases = [r for r in releases if may_see(PUBLIC, r)]
    if not releases:
        raise unknown
    if version is not None:
        for r in releases:
            if r["version"] == version:
                return r
        raise unknown
    if public:
        shown = [r for r in releases if is_listed(PUBLIC, r)]
        if not shown:
            raise NotFound(f"suite '{key}' has no public version; name one", "version")
        releases = shown
    return max(releases, key=lambda r: version_key(r["version"]))


def pinned_bundle(store: Store, release: ReleaseRow) -> SuiteBundle:
    """The release's scenarios, rebuilt from the documents it pinned, hashes verified."""
    repo = ReleasesRepo(store)
    loaded: list[LoadedScenario] = []
    where = f"{release['suite_key']} {release['version']}"
    for row in repo.release_scenarios(release["id"]):
        scenario = parse_scenario(row.document, f"stored scenario {row.case_id} v{row.scenario_version}", get_kit)
        if scenario.content_hash != row.scenario_hash:
            raise Conflict(
                f"scenario {row.case_id} no longer materialises the world this release pinned "
                f"({row.scenario_hash[:HASH_PREFIX]} → {scenario.content_hash[:HASH_PREFIX]}: the world kit "
                "changed); release a new suite version to run it", value=where)
        loaded.append(scenario)
    document = {k: v for k, v in release["document"].items() if k != "rubric"}  # there: its hash
    suite = Suite.model_validate({**document, "scenarios": [s.id for s in loaded]})
    return SuiteBundle(release["suite_key"], release["version"], suite, tuple(loaded), f"release {where}",
                       release_rubric(release))


def release_rubric(release: AnyRelease) -> Rubric | None:
    """The trait rubric a release pinned (None for an oracle-only suite)."""
    return Rubric.model_validate(release["rubric"]) if release.get("rubric") is not None else None


# -- views ------------------------------------------------------------------------------------
# JSON columns come back from PostgreSQL's JSONB with their keys reordered; re-validating through
# the document models gives one key order on both backends. The views are TypedDicts: served and
# printed as they are (the API's bodies, the CLI's JSON), keys in the order written here.


class PinShortView(TypedDict):
    """A pinned scenario as a suite's versions list it (`web.schemas.PinShort`)."""

    case_id: str
    version: int
    hash_prefix: str


class PinView(TypedDict):
    """A pinned scenario as a release shows it (`web.schemas.Pin`), keys in this order."""

    case_id: str
    version: int
    title: str
    hash: str
    hash_prefix: str
    frozen_on: str | None


class SummaryView(TypedDict):
    """A release as the index lists it (`web.schemas.SuiteSummary`)."""

    key: str
    version: str
    title: str
    language: str
    visibility: str
    reps_per_scenario: int
    released_at: str
    release_hash: str
    builtin: bool


class VersionView(SummaryView):
    """A release among its suite's versions (`web.schemas.SuiteVersion`)."""

    scenarios: list[PinShortView]


class ReleaseView(SummaryView):
    """Everything a release pins (`web.schemas.SuiteRelease`)."""

    owner: str | None
    facilitator_model: str | None
    judge: JsonObject | None  # `JudgeConfig`, as the suite document declared it
    scenarios: list[PinView]
    baselines: list[JsonObject]  # `Baseline`s, as the suite document declared them
    known_limitations: list[str]
    card: str


def judge_view(release: ReleaseRow) -> JsonObject | None:
    judge = release["judge"]
    return JudgeConfig.model_validate(judge).model_dump(mode="json") if judge is not None else None


def baselines_view(release: ReleaseRow) -> list[JsonObject]:
    return [Baseline.model_validate(b).model_dump(mode="json") for b in release["baselines"]]


def scenario_pins(store: Store, release: ReleaseRow) -> list[PinView]:
    return [
        {"case_id": r.case_id, "version": r.scenario_version, "title": r.title,
         "hash": r.scenario_hash, "hash_prefix": r.scenario_hash[:HASH_PREFIX], "frozen_on": r.frozen_on}
        for r in ReleasesRepo(store).release_scenarios(release["id"])
    ]


def summary_view(release: ReleaseRow) -> SummaryView:
    """A release as the index lists it."""
    return {
        "key": release["suite_key"],
        "version": release["version"],
        "title": release["title"],
        "language": release["language"],
        "visibility": release["visibility"],
        "reps_per_scenario": release["reps_per_scenario"],
        "released_at": release["created_at"].isoformat(),
        "release_hash": release["release_hash"],
        "builtin": bool(release["builtin"]),
    }


def release_view(store: Store, release: ReleaseRow) -> ReleaseView:
    """Everything a release pins."""
    return {
        **summary_view(release),
        "owner": release["owner"],
        "facilitator_model": release["facilitator_model"],
        "judge": judge_view(release),
        "scenarios": scenario_pins(store, release),
        "baselines": baselines_view(release),
        "known_limitations": release["known_limitations"],
        "card": release["card"],
    }


def list_releases(store: Store, *, actor: Actor) -> list[SummaryView]:
    """Every release for the staff; the public versions only for the public (the actor's index:
    `actors.is_listed`)."""
    return [summary_view(r) for r in ReleasesRepo(store).releases() if is_listed(actor, r)]


def versions(store: Store, key: str, *, actor: Actor) -> list[VersionView]:
    """A suite's versions, oldest first; an internal one exists only for the staff."""
    releases = sorted((r for r in ReleasesRepo(store).releases(key) if may_see(actor, r)),
                      key=lambda r: version_key(r["version"]))
    if not releases:
        raise NotFound(f"no released suite '{key}'", "suite")
    return [{**summary_view(r),
             "scenarios": [{"case_id": p["case_id"], "version": p["version"], "hash_prefix": p["hash_prefix"]}
                           for p in scenario_pins(store, r)]} for r in releases]
