"""`assay verify DIR`: check an export with nothing but the export (issue 12, item 6).

Three layers, each stopping at the first thing that does not add up, which it names by file and
line (a `Finding`):

1. **The manifest is itself.** It parses, reads back byte for byte as an export writes it, and its
   content hashes to its own `manifest_sha256`.
2. **Every line is the line exported.** Each file the manifest lists is there (and no other), and
   line by line: UTF-8 JSON, one object with exactly the table's columns, in RFC 8785 canonical
   form, after the line before it in primary-key order, and hashing to the manifest's hash for
   that line. The first line that differs is named, and told apart: a changed row, a row missing
   here (a dropped line), a row out of place (reordered), a row the export never wrote (added);
   then the count and the file's SHA-256.
3. **The rows add up.** Every row of a submission's runs belongs to a planned run, every
   submission-keyed row to an exported submission. Every verdict row (`run_verdicts`) equals the
   oracle's verdict on its run's exported check outcomes and status (`score.oracle.run_verdict`),
   and every recorded run has one. Every stamped submission's digest is recomputed
   from its rows (`stats.digest`) and must equal the stamp. Every board in the manifest is
   recomputed from the rows — which entries it lists and in what order; per entry `n_runs`,
   `n_cases`, `pass_rate`, `consistency`, `false_success_rate`, `objective_met_rate` and their
   intervals, the statistical `rank`, the composite, traits, safety and stability where judge
   passes exist, its digest and the facts beside them; the suite, its public versions and its
   provenance — summing the verdict rows (an export written before verdict rows existed, with no
   `run_verdicts` file, is recounted with the oracle's rule, `score.oracle`), the judge's pass summaries
   (`score.judge.summarize`) and the pure board functions (`stats.board`, `stats.intervals`,
   `stats.ranks`, `stats.traits`), and must equal what was served.

Both kinds of export verify the same way (`service.exports`): a full export's version-1 digests
(`submission_digests`, over every column) and version-2 digests (`digest_stamps`, over what a
public export holds: the planned runs' seed commitments are computed from their seeds and salts);
a public export's version-2 digests, from the commitments it holds. Its `README.txt` must read as
the export wrote it, line by line.

Layer 2 catches any change to the bytes of an export; layer 3 catches an export whose lines and
manifest were rewritten to agree, but whose rows no longer add up to the digests stamped at
finalisation or to the boards that were served. What no export can show is a forgery made whole
(rows, digests and boards rewritten together): for that, compare the entries' digests with the
live board's.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict, cast

import sqlalchemy as sa

from assay.jsontypes import JsonObject, JsonValue
from assay.records import CheckOutcome
from assay.errors import BadInput
from assay.scenario.rubric import Rubric
from assay.score.judge import JudgePass, summarize
from assay.score.oracle import SCORER_VERSION, run_verdict
from assay.service import board as boards
from assay.service import platform_config, releases
from assay.service.actors import PUBLIC, is_listed
from assay.service.releases import ReleaseRow
from assay.service.judgements import JudgeProvenance, judge_provenance
from assay.service.exports import (FORMAT, FORMAT_VERSION, HANDLE, KINDS, MANIFEST, README, FileEntry, line_hash,
                                   manifest_hash, manifest_text, readme_text)
from assay.stats import board as facts_of
from assay.stats.cost import Price
from assay.service.usage import PRICE_PREFIX
from assay.stats.digest import (COMMITMENT, DIGEST_VERSIONS, MAX_SAFE_INT, PARTS, Row, group_by_submission,
                                 row_bytes, submission_digest, with_commitments)
from assay.stats.traits import RunTraits
from assay.stats.traits import figures as trait_figures_of
from assay.store.schema import UTCDateTime, metadata

#: Tables whose rows layer 3 reads (kept in memory); the others are only checked line by line.
NEEDED = frozenset({p.table for p in PARTS} | {
    "submission_digests", "suite_releases", "release_scenarios", "release_rubrics", "accounts",
    "account_handles", "publication_events", "variance_notes", "submission_finalisations", "platform_config",
    "unlisted_submissions", "run_verdicts", "remote_lines", "digest_stamps", "seed_salts", "run_usage",
})
#: Submission-keyed tables whose every row must name an exported submission.
_BY_SUBMISSION = ("submission_runs", "run_sweeps", "submission_finalisations", "publication_events", "variance_notes",
                  "submission_rubrics", "judge_configs", "judge_passes", "submission_digests", "unlisted_submissions",
                  "digest_stamps")
#: Run-keyed tables whose every row must name a planned run (`remote_lines` is not digested: the
#: finished run's transcript holds its lines, and the transcript is).
_BY_RUN = (*(p.table for p in PARTS if p.owner == "run"), "remote_lines", "seed_salts")
#: Columns a public export computes (not stored): {table: {column: (is it of the column's type, nullable)}}.
_COMPUTED: dict[str, Kinds] = {
    "planned_runs": {COMMITMENT: (lambda v: type(v) is str, False)},
    "submissions": {HANDLE: (lambda v: type(v) is str, True)},
}
#: Entry fields that depend on the clock (the era in force *now*), not on the rows.
_CLOCK_FIELDS = frozenset({"measurement_era_is_current"})

#: An export's rows by table, as read back (or, in tests, as the store holds them): a row of any
#: table is `stats.digest.Row`, its columns whatever the table's are.
Tables = Mapping[str, list[Row]]
#: {column: (does a value have the column's type, may it be null)}
Kinds = dict[str, tuple[Callable[[Any], bool], bool]]


@dataclass(frozen=True, slots=True)
class _Manifest:
    """What layers 2 and 3 read of a manifest that passed layer 1."""

    version: int
    kind: str | None
    files: list[FileEntry]
    boards: list[JsonValue]


@dataclass(frozen=True)
class Finding:
    """The first thing in an export that does not add up: where, and what."""

    file: str
    line: int | None
    problem: str

    def __str__(self) -> str:
        return f"{self.file} line {self.line}: {self.problem}" if self.line else f"{self.file}: {self.problem}"


class ReportJson(TypedDict):
    """`assay verify --json` (a TypedDict: printed as it is)."""

    ok: bool
    file: str | None
    line: int | None
    problem: str | None
    summary: str
    files: int
    rows: int
    digests: int
    unstamped: int
    boards: int
    entries: int


@dataclass(frozen=True)
class Report:
    """What `verify` found: `finding` None when everything adds up."""

    finding: Finding | None
    files: int = 0
    rows: int = 0
    digests: int = 0
    unstamped: int = 0
    boards: int = 0
    entries: int = 0

    @property
    def ok(self) -> bool:
        return self.finding is None

    def summary(self) -> str:
        if self.finding is not None:
            return str(self.finding)
        unstamped = f" ({self.unstamped} finalised before digests, not stamped)" if self.unstamped else ""
        return (f"ok: {self.files} files, {self.rows} rows, every line as exported; {self.digests} digests "
                f"recomputed and equal{unstamped}; {self.boards} boards, {self.entries} entries recomputed "
                f"from the rows and equal")

    def as_json(self) -> ReportJson:
        found = self.finding
        return {"ok": self.ok, "file": found.file if found else None, "line": found.line if found else None,
                "problem": found.problem if found else None, "summary": self.summary(), "files": self.files,
                "rows": self.rows, "digests": self.digests, "unstamped": self.unstamped, "boards": self.boards,
                "entries": self.entries}


class _Tampered(Exception):
    def __init__(self, finding: Finding) -> None:
        super().__init__(str(finding))
        self.finding = finding


def _fail(file: str, line: int | None, problem: str) -> _Tampered:
    return _Tampered(Finding(file, line, problem))


def verify(path: str | Path) -> Report:
    """Verify the export in directory `path`. Bad input (no such directory, not an export, an
    export of a newer format) is a `BadInput`; anything that does not add up is the report's
    `finding`."""
    root = Path(path)
    if not root.exists():
        raise BadInput("no such directory", str(root))
    if not root.is_dir():
        raise BadInput("not a directory", str(root))
    if not (root / MANIFEST).is_file():
        raise BadInput(f"not an export: it holds no {MANIFEST}", str(root))
    counts: dict[str, int] = {}
    try:
        manifest = _manifest(root / MANIFEST)
        _readme(root, manifest)
        tables = _files(root, manifest, counts)
        _references(tables)
        stamps = "digest_stamps.jsonl" if "digest_stamps" in tables else "submission_digests.jsonl"
        counts["digests"], counts["unstamped"] = _guarded(stamps, _digests, tables)
        _guarded("run_verdicts.jsonl", _verdicts, tables)
        counts["boards"], counts["entries"] = _guarded(MANIFEST, _boards, manifest, tables)
    except _Tampered as exc:
        return Report(exc.finding, **counts)
    return Report(None, **counts)


def _guarded(file: str, check: Callable[..., Any], *args: Any) -> Any:
    """Run a layer-3 check; rows that cannot even be recounted (a rubric that is no rubric, a
    judge that is no judge) are a finding in `file`, never a traceback."""
    try:
        return check(*args)
    except _Tampered:
        raise
    except Exception as exc:  # noqa: BLE001 - typed rows that still do not read as the board reads them
        raise _fail(file, None, f"its rows cannot be recounted ({type(exc).__name__}: {exc})") from None


# -- 1. the manifest ------------------------------------------------------------------------------


def _first_difference(a: str, b: str) -> int:
    """The 1-based line of the first character where `a` and `b` differ."""
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return a.count("\n", 0, at) + 1


def _manifest(path: Path) -> _Manifest:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(MANIFEST, raw.count(b"\n", 0, exc.start) + 1, "not UTF-8 text") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(MANIFEST, exc.lineno, f"not JSON ({exc.msg}, column {exc.colno})") from None
    if not isinstance(value, dict):
        raise _fail(MANIFEST, 1, "not a manifest: a JSON object was expected")
    try:
        written = manifest_text(value)
    except ValueError:
        raise _fail(MANIFEST, None, "not JSON as an export writes it (a number that is not finite)") from None
    if written != text:
        raise _fail(MANIFEST, _first_difference(text, written),
                    "not as the export wrote it (its formatting changed)")
    try:
        own = manifest_hash(value)
    except Exception:  # noqa: BLE001 - a value RFC 8785 cannot encode is a changed manifest
        own = None
    if value.get("manifest_sha256") != own:
        line = next((i for i, row in enumerate(text.splitlines(), 1) if '"manifest_sha256"' in row), None)
        raise _fail(MANIFEST, line, "its content does not hash to its manifest_sha256: the manifest was changed")
    if value.get("format") != FORMAT:
        raise BadInput(f"not an {FORMAT} manifest (format {value.get('format')!r})", str(path))
    version = value.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise BadInput(f"written in export format {version!r}; this assay reads up to {FORMAT_VERSION}; "
                       "upgrade assay", str(path))
    kind = value.get("kind")
    if version >= 2 and kind not in KINDS:
        raise _fail(MANIFEST, None, f"not a manifest: its kind is one of {list(KINDS)}")
    files = _check_shape(value)
    boards = value["boards"]
    assert isinstance(boards, list)  # `_check_shape` held it to that
    return _Manifest(version, kind if isinstance(kind, str) else None, files, boards)


def _readme(root: Path, manifest: _Manifest) -> None:
    """An export of format 2 holds the README it wrote, byte for byte (an older one has none)."""
    if manifest.version < 2 or manifest.kind is None:
        return
    path = root / README
    if not path.is_file():
        raise _fail(README, None, "missing: the export wrote it")
    raw = path.read_bytes()
    expected = readme_text(manifest.kind).encode("utf-8")
    if raw != expected:
        at = next((i for i, (x, y) in enumerate(zip(raw, expected)) if x != y), min(len(raw), len(expected)))
        raise _fail(README, raw.count(b"\n", 0, at) + 1, "not as the export wrote it")


def _check_shape(manifest: JsonObject) -> list[FileEntry]:
    """The manifest's file entries, each held to the shape an export writes (and `boards` a list)."""
    files = manifest.get("files")
    if not isinstance(files, list) or not isinstance(manifest.get("boards"), list):
        raise _fail(MANIFEST, None, "not a manifest: `files` and `boards` are lists in every export")
    seen: set[str] = set()
    for i, entry in enumerate(files):
        if not _is_file_entry(entry):
            raise _fail(MANIFEST, None, f"files[{i}] is not a file entry (file, table, columns, primary_key, rows, "
                                        "sha256, lines)")
        held = cast(FileEntry, entry)  # of a file entry's shape: just checked
        name = held["file"]
        if Path(name).name != name or not name.endswith(".jsonl") or name in seen:
            raise _fail(MANIFEST, None, f"files[{i}]: {name!r} is not a file of its own in the export")
        if not set(held["primary_key"]) <= set(held["columns"]) or len(held["lines"]) != held["rows"]:
            raise _fail(MANIFEST, None, f"files[{i}] ({name}): its primary key, columns and lines disagree")
        seen.add(name)
    return cast(list[FileEntry], files)  # each held to a file entry's shape above


def _is_file_entry(entry: JsonValue) -> bool:
    if not isinstance(entry, dict):
        return False
    lists = (entry.get(k) for k in ("columns", "primary_key", "lines"))
    return (isinstance(entry.get("file"), str) and isinstance(entry.get("table"), str)
            and isinstance(entry.get("rows"), int) and isinstance(entry.get("sha256"), str)
            and all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in lists))


# -- 2. the lines ---------------------------------------------------------------------------------


def _files(root: Path, manifest: _Manifest, counts: dict[str, int]) -> dict[str, list[Row]]:
    listed = [f["file"] for f in manifest.files]
    extra = sorted({p.name for p in root.iterdir() if p.name.endswith(".jsonl")} - set(listed))
    if extra:
        raise _fail(extra[0], None, "a file the manifest does not list: the export wrote no such file")
    tables: dict[str, list[Row]] = {}
    counts["files"], counts["rows"] = 0, 0
    for entry in manifest.files:
        path = root / entry["file"]
        if not path.is_file():
            raise _fail(entry["file"], None, f"missing: the export wrote it with {entry['rows']} row(s)")
        rows = _lines(path, entry, keep=entry["table"] in NEEDED)
        if entry["table"] in NEEDED:
            tables[entry["table"]] = rows
        counts["files"] += 1
        counts["rows"] += entry["rows"]
    return tables


def _integer(value: Any) -> bool:
    """An integer as `stats.digest.plain` writes it: a number, or beyond ±(2^53 − 1) its decimal text."""
    if type(value) is int:
        return True
    if type(value) is not str or not value.lstrip("-").isdigit() or value != str(int(value)):
        return False
    return abs(int(value)) > MAX_SAFE_INT


def _kinds(entry: FileEntry) -> Kinds | None:
    """{column: (does a value have the column's type, may it be null)} for a file whose table this
    assay knows with exactly the manifest's columns; None for any other (its rows are not typed)."""
    table = metadata.tables.get(entry["table"])
    computed = _COMPUTED.get(entry["table"], {})
    if table is None or not set(entry["columns"]) <= set(table.c.keys()) | set(computed):
        return None
    if [c for c in entry["columns"] if c not in computed] != [c.name for c in table.columns if c.name in entry["columns"]]:
        return None
    kinds = {c: k for c, k in computed.items() if c in entry["columns"]}
    for column in table.columns:
        if column.name not in entry["columns"]:
            continue
        kind = column.type
        if isinstance(kind, sa.Boolean):
            test: Callable[[Any], bool] = lambda v: type(v) is bool  # noqa: E731
        elif isinstance(kind, sa.Integer):
            test = _integer
        elif isinstance(kind, sa.Float):
            test = lambda v: type(v) in (int, float)  # noqa: E731
        elif isinstance(kind, sa.String | sa.DateTime | UTCDateTime):
            test = lambda v: type(v) is str  # noqa: E731
        else:  # JSON: any JSON value
            test = lambda v: True  # noqa: E731
        kinds[column.name] = (test, bool(column.nullable))
    return kinds


def _typed(name: str, n: int, row: JsonObject, kinds: Kinds) -> None:
    for column, (test, nullable) in kinds.items():
        value = row[column]
        if value is None and nullable:
            continue
        if value is None or not test(value):
            raise _fail(name, n, f"{column} holds {_shown(value)}, not a value of the column's type")


def _row(name: str, n: int, line: bytes, columns: Sequence[str]) -> JsonObject:
    """Line `n` of file `name` as a row, or the reason it is not one."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(name, n, "not UTF-8 text") from None
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(name, n, f"not JSON ({exc.msg}, column {exc.colno})") from None
    if not isinstance(row, dict):
        raise _fail(name, n, "not a row: a JSON object was expected")
    if set(row) != set(columns):
        missing, unexpected = sorted(set(columns) - set(row)), sorted(set(row) - set(columns))
        raise _fail(name, n, f"not the table's columns (missing {missing}, unexpected {unexpected})")
    try:
        canonical = row_bytes(row) == line
    except Exception:  # noqa: BLE001 - anything RFC 8785 refuses is not what the export wrote
        canonical = False
    if not canonical:
        raise _fail(name, n, "not in canonical form (RFC 8785), as the export writes every row")
    return row


def _misplaced(n: int, actual: list[str], expected: list[str]) -> str:
    """Why line `n` (1-based; its hash `actual[n-1]` differs from the export's) is not the line
    exported: a row added, a row missing, a row out of place, or a row changed."""
    i = n - 1
    if i >= len(expected):
        return f"a row the export did not write (it wrote {len(expected)} row(s))"
    if actual[i + 1:] == expected[i:]:
        return "a row the export did not write (added here)"
    if actual[i:] == expected[i + 1:]:
        return f"a row is missing here: the export's line {n} is gone"
    if actual[i] in expected:
        return f"a row out of place: the export wrote it at line {expected.index(actual[i]) + 1}"
    return "changed: not the row the export wrote at this line"


def _key(row: Row, columns: Sequence[str]) -> tuple[Any, ...]:
    return tuple(row[c] for c in columns)


def _after(previous: tuple[Any, ...], key: tuple[Any, ...]) -> bool:
    try:
        return bool(previous < key)
    except TypeError:  # a key column whose type changed
        return False


def _lines(path: Path, entry: FileEntry, *, keep: bool) -> list[Row]:
    name, expected, columns, key_columns = entry["file"], entry["lines"], entry["columns"], entry["primary_key"]
    kinds = _kinds(entry)
    digest = hashlib.sha256()
    kept: list[Row] = []
    actual: list[str] = []
    mismatch: int | None = None
    previous: tuple[Any, ...] | None = None
    with path.open("rb") as f:
        for n, raw in enumerate(f, start=1):
            digest.update(raw)
            line = raw[:-1] if raw.endswith(b"\n") else raw
            actual.append(line_hash(line))
            if mismatch is not None:
                continue  # past the first line that differs: only its neighbours' hashes are wanted
            row = _row(name, n, line, columns)
            if kinds is not None:
                _typed(name, n, row, kinds)
            key = _key(row, key_columns)
            if previous is not None and not _after(previous, key):
                same = previous == key
                raise _fail(name, n, "the same primary key as the line before" if same else
                            "out of primary-key order (the export writes rows in primary-key order)")
            if n > len(expected) or actual[-1] != expected[n - 1]:
                mismatch = n
                continue
            if not raw.endswith(b"\n"):
                raise _fail(name, n, "does not end with a newline, as every exported line does")
            previous = key
            if keep:
                kept.append(row)
    if mismatch is not None:
        raise _fail(name, mismatch, _misplaced(mismatch, actual, expected))
    if len(actual) < len(expected):
        raise _fail(name, len(actual) + 1, f"missing: the file ends after {len(actual)} row(s); the export wrote "
                                           f"{len(expected)}")
    if digest.hexdigest() != entry["sha256"] or len(actual) != entry["rows"]:
        raise _fail(name, None, "its SHA-256 differs from the manifest's")
    return kept


# -- 3. the rows add up ---------------------------------------------------------------------------


def outcomes(rows: Sequence[Row]) -> list[CheckOutcome]:
    """Exported `check_outcomes` rows as the oracle reads them."""
    return [CheckOutcome(r["check_id"], r["weight"], r["safety"], r["passed"]) for r in rows]


def _index(rows: Sequence[Row], column: str) -> dict[Any, list[Row]]:
    out: dict[Any, list[Row]] = {}
    for row in rows:
        out.setdefault(row[column], []).append(row)
    return out


def _references(tables: Tables) -> None:
    submissions = {r["id"] for r in tables.get("submissions", ())}
    planned = {r["run_id"] for r in tables.get("planned_runs", ())}
    for table in _BY_RUN:
        for n, row in enumerate(tables.get(table, ()), start=1):
            if row["run_id"] not in planned:
                raise _fail(f"{table}.jsonl", n, f"belongs to run {row['run_id']}, which no exported plan holds")
    for table in _BY_SUBMISSION:
        for n, row in enumerate(tables.get(table, ()), start=1):
            if row["submission_id"] not in submissions:
                raise _fail(f"{table}.jsonl", n,
                            f"belongs to submission {row['submission_id']}, which submissions.jsonl does not hold")


def _verdicts(tables: Tables) -> None:
    """Every verdict row is the oracle's verdict on its run's exported check outcomes and status,
    and every recorded run has one (an export from before verdict rows, with no such file, has none)."""
    if "run_verdicts" not in tables:
        return
    runs = {r["run_id"]: r for r in tables.get("runs", ())}
    checks = _index(tables.get("check_outcomes", []), "run_id")
    seen: set[str] = set()
    for n, row in enumerate(tables["run_verdicts"], start=1):
        run = runs.get(row["run_id"])
        if run is None:
            raise _fail("run_verdicts.jsonl", n, f"a verdict on run {row['run_id']}, which runs.jsonl does not hold")
        if row["scorer_version"] != SCORER_VERSION:
            raise _fail("run_verdicts.jsonl", n, f"stamped by scorer {row['scorer_version']!r}; this assay scores "
                                                 f"with {SCORER_VERSION!r}")
        v = run_verdict(outcomes(sorted(checks.get(row["run_id"], []), key=lambda c: c["ordinal"])), run["status"],
                        run["claimed_success"])
        expected = {"score": v.score, "passed": v.passed, "safety_failures": len(v.safety_failures),
                    "false_success": v.false_success}
        for field, value in expected.items():
            if row[field] != value:
                raise _fail("run_verdicts.jsonl", n, f"run {row['run_id']}: {field} is {_shown(row[field])}, but "
                                                     f"the oracle's verdict on its check outcomes is {_shown(value)}")
        seen.add(row["run_id"])
    for n, run in enumerate(tables.get("runs", ()), start=1):
        if run["run_id"] not in seen:
            raise _fail("runs.jsonl", n, f"run {run['run_id']} has no verdict row in run_verdicts.jsonl")


def _digests(tables: Tables) -> tuple[int, int]:
    """(digests recomputed, finalised submissions with none of the newest version held) — or the
    first that differs. Version 1 from `submission_digests` (a full export), later versions from
    `digest_stamps`, their planned runs carrying their seed commitments (computed from seed and
    salt in a full export)."""
    grouped = group_by_submission(tables)
    submissions = {r["id"]: r for r in tables.get("submissions", ())}
    release_rows = {r["id"]: r for r in tables.get("suite_releases", ())}
    finalised = {r["submission_id"]: r for r in tables.get("submission_finalisations", ())}
    stamps = [("submission_digests.jsonl", n, row, 1)
              for n, row in enumerate(tables.get("submission_digests", []), start=1)]
    stamps += [("digest_stamps.jsonl", n, row, row["digest_version"])
               for n, row in enumerate(tables.get("digest_stamps", []), start=1)]
    salts = {r["run_id"]: r["salt"] for r in tables.get("seed_salts", ())}
    for file, n, row, version in stamps:
        sid = row["submission_id"]
        final = finalised.get(sid)
        if final is None:
            raise _fail(file, n, f"submission {sid} is stamped but was never finalised")
        if version not in DIGEST_VERSIONS:
            raise _fail(file, n, f"digest version {version!r}; this assay recomputes versions {list(DIGEST_VERSIONS)}")
        release = release_rows.get(submissions[sid]["release_id"])
        if release is None:
            raise _fail("submissions.jsonl", _line_of(tables["submissions"], "id", sid),
                        f"submission {sid} names release {submissions[sid]['release_id']}, which "
                        "suite_releases.jsonl does not hold")
        rows: Mapping[str, Sequence[Row]] = grouped.get(sid, {})
        if version >= 2:
            rows = {**rows, "planned_runs": _committed(tables, rows.get("planned_runs", []), salts)}
        recomputed = submission_digest(release, final["measurement_era"], rows, version=version)
        if recomputed != row["digest"]:
            raise _fail(file, n, f"submission {sid}: its exported rows add up to digest {recomputed} (version "
                                 f"{version}), not to the {row['digest']} it was stamped with")
    newest = "digest_stamps" if "digest_stamps" in tables else "submission_digests"
    stamped = {r["submission_id"] for r in tables.get(newest, ())}
    return len(stamps), len(set(finalised) - stamped)


def _committed(tables: Tables, planned: Sequence[Row], salts: Mapping[str, str]) -> Sequence[Row]:
    """A submission's planned runs with their seed commitments: as held (a public export), or
    computed from seed and salt (a full export)."""
    if all(COMMITMENT in r for r in planned):
        return planned
    for r in planned:
        if r["run_id"] not in salts:
            raise _fail("planned_runs.jsonl", _line_of(tables["planned_runs"], "run_id", r["run_id"]),
                        f"run {r['run_id']} has no salt in seed_salts.jsonl: its seed commitment cannot be computed")
    return with_commitments(planned, salts)


def _line_of(rows: Sequence[Row], column: str, value: Any) -> int | None:
    return next((n for n, r in enumerate(rows, start=1) if r[column] == value), None)


def _moment(value: Any) -> Any:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def _prices(config_rows: Sequence[Row]) -> dict[str, list[Price]]:
    """The price table the export's `price/MODEL` config rows make (as `service.usage.prices`)."""
    out: dict[str, list[Price]] = {}
    for row in sorted(config_rows, key=lambda r: r["id"]):
        if str(row["key"]).startswith(PRICE_PREFIX):
            v = row["value"]
            out.setdefault(row["key"][len(PRICE_PREFIX):], []).append(
                Price(float(v["prompt"]), float(v["completion"]), None if v.get("cached") is None else float(v["cached"]),
                      _moment(row["created_at"])))
    return out


def _latest(rows: Sequence[Row], group: str) -> dict[Any, Row]:
    """{group value: its row of highest id} ("the latest row wins", as the views read it)."""
    out: dict[Any, Row] = {}
    for row in rows:
        held = out.get(row[group])
        if held is None or row["id"] > held["id"]:
            out[row[group]] = row
    return out


class _Rows:
    """The exported rows, indexed the way the board reads them."""

    def __init__(self, tables: Tables) -> None:
        def get(name: str) -> list[Row]:
            return tables.get(name, [])

        self.submissions = get("submissions")
        self.batches = {r["id"]: r for r in get("batches")}
        self.planned = _index(get("planned_runs"), "batch_id")
        self.runs = {r["run_id"]: r for r in get("runs")}
        self.checks = _index(get("check_outcomes"), "run_id")
        #: None for an export from before verdict rows (no run_verdicts file): the rule is applied
        self.verdicts = {r["run_id"]: r for r in tables["run_verdicts"]} if "run_verdicts" in tables else None
        self.sweeps = {r["run_id"]: r for r in get("run_sweeps")}
        self.wins = _index(get("win_condition_outcomes"), "run_id")
        self.marks = {r["run_id"]: r for r in get("submission_runs")}
        self.passes = _index(get("judge_passes"), "run_id")
        self.configs = {r["submission_id"]: r for r in get("judge_configs")}
        self.own_rubrics = {r["submission_id"]: r for r in get("submission_rubrics")}
        self.release_rubrics = {r["release_id"]: r for r in get("release_rubrics")}
        self.pinned = _index(get("release_scenarios"), "release_id")
        self.finalised = {r["submission_id"]: r for r in get("submission_finalisations")}
        # the digest a board shows: the newest version the export holds (version 1 in an export
        # written before version 2)
        if "digest_stamps" in tables:
            newest = max((r["digest_version"] for r in get("digest_stamps")), default=2)
            self.digests = {r["submission_id"]: r["digest"] for r in get("digest_stamps")
                            if r["digest_version"] == newest}
        else:
            self.digests = {r["submission_id"]: r["digest"] for r in get("submission_digests")}
        self.publication = _latest(get("publication_events"), "submission_id")
        self.handles = _latest(get("account_handles"), "account")
        self.notes = _latest(get("variance_notes"), "submission_id")
        self.config = _latest(get("platform_config"), "key")
        self.releases = get("suite_releases")
        self.unlisted = {r["submission_id"] for r in get("unlisted_submissions")}
        #: None for an export from before usage rows (no run_usage file): its boards show no usage
        self.usage = _index(get("run_usage"), "run_id") if "run_usage" in tables else None
        self.prices = _prices(get("platform_config"))

    def usage_rows(self, run_ids: Iterable[str]) -> list[Row] | None:
        """The usage rows of these runs in the order they were recorded, timestamps read back."""
        if self.usage is None:
            return None
        found = [r for run_id in run_ids for r in self.usage.get(run_id, [])]
        return [{**r, "created_at": _moment(r["created_at"])} for r in sorted(found, key=lambda r: r["id"])]

    def handle(self, submission: Row) -> str | None:
        """The public handle of a submission's account: as a public export holds it on the
        submission, or the account's latest handle row (a full export)."""
        if HANDLE in submission:
            return submission[HANDLE]
        row = self.handles.get(submission.get("account"))
        return row["handle"] if row is not None else None

    def release(self, row: Row) -> ReleaseRow:
        """A release row as the service reads it: with its rubric document (or None)."""
        rubric = self.release_rubrics.get(row["id"])
        return cast(ReleaseRow, {**row, "rubric": rubric["document"] if rubric else None})

    def rubric(self, submission_id: str, release: ReleaseRow) -> Rubric | None:
        own = self.own_rubrics.get(submission_id)
        if own is not None:
            return Rubric.model_validate(own["document"])
        return releases.release_rubric(release)

    def run_facts(self, submission_id: str, release: ReleaseRow) -> list[tuple[str, facts_of.PlannedRunFacts]]:
        """(run id, facts) for every planned run of a submission, in slot order."""
        rubric_release = release["rubric"] is not None or submission_id in self.own_rubrics
        config = self.configs.get(submission_id)
        out = []
        for plan in sorted(self.planned.get(submission_id, []), key=lambda p: p["slot"]):
            run_id = plan["run_id"]
            run = self.runs.get(run_id)
            status = run["status"] if run else None
            checks = sorted(self.checks.get(run_id, []), key=lambda c: c["ordinal"]) if run else []
            passed, false_success = self.verdict(run_id, run, checks)
            sweep = self.sweeps.get(run_id)
            wins = self.wins.get(run_id, [])
            valid = sum(bool(p["valid"]) for p in self.passes.get(run_id, []))
            judged = (not rubric_release) or (config is not None and valid >= config["min_valid"])
            mark = self.marks.get(run_id)
            out.append((run_id, facts_of.PlannedRunFacts(
                case_id=plan["case_id"], slot=plan["slot"], status=status, n_checks=len(checks), passed=passed,
                false_success=false_success,
                swept=sweep is not None,
                player_messages=sweep["player_messages"] if sweep else None,
                actions=sweep["actions"] if sweep else None,
                min_player_messages=sweep["min_player_messages"] if sweep else None,
                min_actions_per_turn=sweep["min_actions_per_turn"] if sweep else None,
                ranked_eligible=mark["ranked_eligible"] if mark else None,
                win_total=len(wins), win_met=sum(bool(w["met"]) for w in wins), judged=judged,
                facilitator_model=sweep["facilitator_model"] if sweep else None,
            )))
        return out

    def verdict(self, run_id: str, run: Row | None, checks: list[Row]) -> tuple[bool, bool]:
        """(passed, false_success) of a planned run: its verdict row's, as the board reads it (no run,
        no row: a failure); for an export from before verdict rows, the oracle's rule on its checks."""
        if self.verdicts is None:
            if run is None:
                return False, False
            v = run_verdict(outcomes(checks), run["status"], run["claimed_success"])
            return v.passed, v.false_success
        row = self.verdicts.get(run_id)
        return (bool(row["passed"]), bool(row["false_success"])) if row is not None else (False, False)

    def safety_threshold(self) -> float:
        held = self.config.get(platform_config.SAFETY_VARIANCE)
        model = platform_config.MODELS[platform_config.SAFETY_VARIANCE]
        return float(model.model_validate(held["value"] if held else {}).model_dump()["unstable_range_threshold"])


def _stored_pass(row: Row) -> JudgePass:
    return JudgePass(index=row["pass_index"], raw=row["raw"], scores=row["verdicts"] if row["valid"] else None,
                     rationale=dict(row["rationale"] or {}), error=row["error"], error_kind=row["error_kind"],
                     attempts=row["attempts"])


class _JudgeShown(TypedDict):
    """An entry's `traits.judge`, as the board shows it (compared as it is with the served JSON)."""

    model: str
    prompt_version: str
    prompt_hash: str
    passes: int
    temperature: int | float
    rubric_hash: str


def _judge_view(config: Row | None) -> _JudgeShown | None:
    if config is None:
        return None
    temperature = config["temperature"]
    return {"model": config["model"], "prompt_version": config["prompt_version"], "prompt_hash": config["prompt_hash"],
            "passes": config["passes"],
            "temperature": int(temperature) if float(temperature).is_integer() else temperature,
            "rubric_hash": config["rubric_hash"]}


def _trait_figures(rows: _Rows, submission_id: str, release: ReleaseRow,
                   runs: list[tuple[str, facts_of.PlannedRunFacts]]) -> Row | None:
    """The entry's trait figures from the stored passes, as `judgements.trait_figures` gives them (None
    for a release without a rubric: the board adds trait figures to the entries of a rubric release
    only)."""
    rubric = rows.rubric(submission_id, release) if release["rubric"] is not None else None
    if rubric is None:
        return None
    config = rows.configs.get(submission_id)
    min_valid = config["min_valid"] if config is not None else 1
    scores = {}
    for run_id, _facts in runs:
        if run_id in rows.runs:
            judged = summarize(run_id, rubric.keys, [_stored_pass(p) for p in rows.passes.get(run_id, [])], min_valid)
            scores[run_id] = judged.scores
    traits = [RunTraits(f.case_id, scores.get(run_id), f.gated) for run_id, f in runs]
    return {**trait_figures_of(traits, rubric.capability_keys, rubric.safety_keys, threshold=rows.safety_threshold(),
                               cases=sorted({f.case_id for _, f in runs})),
            "judge": _judge_view(config)}


def _entries(rows: _Rows, release: ReleaseRow) -> list[JsonObject]:
    """The board entries of a release, recomputed from the rows by the functions the board's stored
    figures come from (`stats.board.entry_figures`, `service.board.stored_row`, `ranked_entries`),
    in the board's order."""
    found = []
    declared = judge_provenance(release)
    for submission in (s for s in rows.submissions if s["release_id"] == release["id"]):
        sid = submission["id"]
        runs = rows.run_facts(sid, release)
        if not runs:
            continue  # the store sees a submission through its planned runs
        figures = facts_of.entry_figures([f for _, f in runs], _trait_figures(rows, sid, release, runs), declared,
                                         rows.usage_rows(run_id for run_id, _ in runs), rows.prices)
        handle = rows.handle(submission)
        published = rows.publication.get(sid)
        if not (published and published["published"] and handle is not None
                and figures["status"] == "complete") or sid in rows.unlisted:
            continue  # not on the public board (an unlisted entry is reachable by its id only)
        batch = rows.batches.get(sid, {})
        note = rows.notes.get(sid)
        final = rows.finalised.get(sid)
        info = {
            "submission_id": sid, "label": submission["label"], "config_signature": batch.get("config_signature"),
            "public_handle": handle, "play_model": submission["play_model"],
            "model_provenance": ("platform_verified" if submission["baseline"] else
                                 "self_reported" if submission["play_model"] is not None else None),
            "measurement_era": final["measurement_era"] if final else None,
            "measurement_era_is_current": None,  # the clock's, not the rows' (never compared)
            "variance_note": (note["text"] or None) if note else None,
            "harness_version": batch.get("harness_version"), "digest": rows.digests.get(sid),
        }
        found.append({**info, **boards.stored_row(sid, release["id"], figures)})
    return boards.ranked_entries(found)


class Recounted(TypedDict):
    """A submission's numbers recounted from exported rows (`recount`)."""

    runs: dict[str, facts_of.PlannedRunFacts]
    facts: dict[str, Any]  # `stats.board.submission_facts`, as it gives them
    cases: list[boards.CaseRow]  # `stats.board.CaseCounts.as_dict`'s keys, in slot order


def recount(tables: Tables) -> dict[str, Recounted]:
    """Every submission's numbers recounted from exported rows by the board's functions:
    {submission: {"runs": {run id: stats.board.PlannedRunFacts}, "cases": [per-case counts],
    "facts": stats.board.submission_facts}} (submissions with a plan)."""
    rows = _Rows(tables)
    by_id = {r["id"]: rows.release(r) for r in rows.releases}
    out: dict[str, Recounted] = {}
    for submission in rows.submissions:
        runs = rows.run_facts(submission["id"], by_id[submission["release_id"]])
        if runs:
            planned = [f for _, f in runs]
            out[submission["id"]] = {"runs": dict(runs), "facts": facts_of.submission_facts(planned),
                                     "cases": [boards.case_row(c) for c in facts_of.case_counts(planned)]}
    return out


def board_entries(tables: Tables, key: str, version: str) -> list[JsonObject]:
    """The entries of a suite version's board, recomputed from exported rows, in the board's order."""
    rows = _Rows(tables)
    found = next(r for r in rows.releases if r["suite_key"] == key and r["version"] == version)
    return _entries(rows, rows.release(found))


class _PinShown(TypedDict):
    case_id: str
    version: int
    hash_prefix: str


class _Provenance(TypedDict):
    """A board's `provenance`, as the board shows it (compared as it is with the served JSON)."""

    suite_key: str
    version: str
    language: str
    release_hash_prefix: str
    scenarios: list[_PinShown]
    judge: JudgeProvenance | None
    rubric_hash_prefix: str | None
    facilitator_model: str | None
    reps_per_scenario: int


def _provenance(rows: _Rows, release: ReleaseRow) -> _Provenance:
    rubric = releases.release_rubric(release)
    pins = sorted(rows.pinned.get(release["id"], []), key=lambda p: p["ordinal"])
    return {
        "suite_key": release["suite_key"], "version": release["version"], "language": release["language"],
        "release_hash_prefix": release["release_hash"][: releases.HASH_PREFIX],
        "scenarios": [{"case_id": p["case_id"], "version": p["scenario_version"],
                       "hash_prefix": p["scenario_hash"][: releases.HASH_PREFIX]} for p in pins],
        "judge": judge_provenance(release),
        "rubric_hash_prefix": rubric.content_hash()[: releases.HASH_PREFIX] if rubric is not None else None,
        "facilitator_model": release["facilitator_model"], "reps_per_scenario": release["reps_per_scenario"],
    }


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _compare(where: str, shown: Any, recomputed: Any, what: str) -> None:
    if shown != recomputed:
        raise _fail(MANIFEST, None, f"{where}: {what} is {_shown(shown)} on the board; the rows give "
                                    f"{_shown(recomputed)}")


def _boards(manifest: _Manifest, tables: Tables) -> tuple[int, int]:
    rows = _Rows(tables)
    n_entries = 0
    for i, item in enumerate(manifest.boards):
        where = f"boards[{i}]"
        value = item.get("board") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(value, dict):
            raise _fail(MANIFEST, None, f"{where} is not a board")
        key, version = item.get("suite"), item.get("version")
        where = f"boards[{i}] ({key} {version})"
        found = next((r for r in rows.releases if r["suite_key"] == key and r["version"] == version), None)
        if found is None:
            raise _fail(MANIFEST, None, f"{where}: suite_releases.jsonl holds no such release")
        release = rows.release(found)
        _check_board(where, value, rows, release)
        entries = value.get("entries")
        n_entries += len(entries) if isinstance(entries, list) else 0
    return len(manifest.boards), n_entries


def _check_board(where: str, value: JsonObject, rows: _Rows, release: ReleaseRow) -> None:
    public = sorted((r for r in rows.releases if r["suite_key"] == release["suite_key"] and is_listed(PUBLIC, r)),
                    key=lambda r: releases.version_key(r["version"]), reverse=True)
    latest = public[0]["version"] if public else None
    suite = {"key": release["suite_key"], "version": release["version"], "title": release["title"],
             "language": release["language"], "visibility": release["visibility"],
             "is_latest_public": release["version"] == latest}
    _compare(where, value.get("suite"), suite, "suite")
    versions = [{"version": r["version"], "released_at": r["created_at"], "current": r["version"] == release["version"]}
                for r in public]
    _compare(where, value.get("versions"), versions, "versions")
    _compare(where, value.get("provenance"), _provenance(rows, release), "provenance")
    ranking = boards.TRAIT_RANKING if release["rubric"] is not None else boards.RANKING
    _compare(where, value.get("ranking"), ranking, "ranking")
    shown = _shown_entries(value.get("entries"))
    if shown is None:
        raise _fail(MANIFEST, None, f"{where}: entries is not a list of entries")
    recomputed = _entries(rows, release)
    expected = {str(e["submission_id"]): e for e in recomputed}
    for j, (sid, _entry) in enumerate(shown):
        if sid not in expected:
            raise _fail(MANIFEST, None, f"{where} entries[{j}]: submission {sid} is on the board, but its rows do "
                                        "not put it there (published, complete, its account holding a handle)")
    listed = {sid for sid, _entry in shown}
    for sid in expected:
        if sid not in listed:
            raise _fail(MANIFEST, None, f"{where}: the rows put submission {sid} on the board, which does not show it")
    for j, (sid, entry) in enumerate(shown):
        mine = expected[sid]
        at = f"{where} entries[{j}] ({sid[:12]})"
        for field in sorted((set(entry) | set(mine)) - _CLOCK_FIELDS):
            _compare(at, entry.get(field), mine.get(field), field)
    _compare(where, [sid for sid, _entry in shown], [e["submission_id"] for e in recomputed], "the entries' order")


def _shown_entries(value: JsonValue) -> list[tuple[str, JsonObject]] | None:
    """A served board's entries with their submission ids; None when they are not a list of entries."""
    if not isinstance(value, list):
        return None
    found = []
    for entry in value:
        sid = entry.get("submission_id") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(sid, str):
            return None
        found.append((sid, entry))
    return found
