"""Tamper-evident entries and exports (issue 12, item 6; issue 23, item 2): the digests a
submission is stamped with when finalised, and `assay export`, the store's append-only rows as
files anyone can verify, in two kinds.

**Digests.** `stamp(conn, submission_id, era)` runs inside the transaction that finalises a
submission (`completion.complete_submission`): it reads every row recorded for the submission as that
transaction sees them (`ExportRepo.digest_rows`, the parts of `assay.stats.digest`) and stamps
both digest versions, once each: version 1 (every column, secrets included) in
`submission_digests`, version 2 (what a public export holds: seed commitments, never seeds) in
`digest_stamps`. The board entry and the owner view show version 2.

**Exports.** `export(store, out, …)` writes one JSON Lines file per table, every row in
primary-key order as its RFC 8785 canonical JSON (`stats.digest.row_bytes`: the very bytes a
digest hashes), `README.txt` (what the export is, whether it holds secrets, how to verify it) and
`manifest.json`: its kind, the harness and schema revision, per file its table, columns, primary
key, row count, SHA-256 and the SHA-256 (first 16 hex digits) of every line, and the boards as the
public is served them. The manifest carries the SHA-256 of its own canonical content
(`manifest_sha256`), so a change anywhere in it is seen too.

- A **full** export (`public=False`, the operator's) holds every append-only table whole but the
  credentials (`EXCLUDED`): seeds and their salts, scenario documents with their hidden truths and
  checks, account names, unpublished and unlisted submissions, `assay run` batches. Its manifest
  says so at its top (`"NOTICE"`, the first key) and in `"contains_secrets": true`, and so does
  its README's first line (the CLI says it on stderr too). With `suite`, only the
  rows of that suite's releases and submissions (and the platform's config and eras).
- A **public** export (`public=True`, anyone's) holds only what the public may see: the public
  releases of the suites (of `suite`; with `version`, that version's board only), the entries of
  their public boards (published, listed, complete) with their plans, runs, check outcomes,
  verdicts, transcripts and judge passes, and the platform's config and eras. Each table is cut
  to `PUBLIC_COLUMNS`: a planned run carries its seed commitment instead of its seed, a
  submission its account's public handle instead of the account's name, a scenario its hashes
  and names but no document (no hidden truth, no check predicate); nothing of `PUBLIC_WITHHELD`
  (accounts, salts, version-1 digests, claims, the panel, credentials). Version-2 digests are
  computed over exactly these rows, so `assay verify` recomputes every one of them and every
  board figure.

Rows are read in one snapshot; the boards are read before and after it and must agree, so a
submission finalised half-way through an export cannot leave a board its rows do not support
(the export is retried, then refused).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import sqlalchemy as sa

from assay import HARNESS_VERSION, __version__
from assay.canonical import canonical_bytes, sha256_hex
from assay.errors import BadInput, Conflict, NotFound
from assay.service import board as boards
from assay.service import releases
from assay.service.actors import PUBLIC, Actor, is_listed, listed_visibilities, require_staff
from assay.stats.digest import DIGEST_VERSION, PARTS_V1, PARTS_V2, Row, row_bytes, submission_digest, with_commitments
from assay.store.db import Store
from assay.store.export_repo import ExportRepo
from assay.store.schema import metadata

FORMAT = "assay-export"
#: 2: a kind (full or public), `README.txt`, version-2 digests (issue 23)
FORMAT_VERSION = 2
MANIFEST = "manifest.json"
README = "README.txt"
KINDS = ("full", "public")
#: Hex digits of each line's SHA-256 kept in the manifest: enough to say which line changed (the
#: file's full SHA-256 is there too), small enough for a manifest of millions of rows.
LINE_HASH_DIGITS = 16
#: Attempts at an export whose store changes under it before it is refused.
ATTEMPTS = 3

EXCLUDED: dict[str, str] = {
    "claim_holders": "operational: the one table updated in place (heartbeats), no result",
    "admins": "credentials: the admins' password hashes",
    "admin_sessions": "credentials: digests of the admins' session tokens",
    "admin_session_ends": "credentials: the ends of the admins' sessions",
    "api_keys": "credentials: digests of API and agent keys",
    "key_revocations": "credentials: the revocations of API and agent keys",
    "panel_applications": "personal data: the panel applicants' emails and statements",
    "entry_figures": "derived: every entry's figures, recomputed from the rows (the boards here are checked against them)",
}
"""Tables an export leaves out, and why. Every other table is append-only and exported."""

#: The column a public submission row carries instead of its account's name.
HANDLE = "public_handle"


class FileEntry(TypedDict):
    """A file as the manifest lists it (a TypedDict: written into the manifest as it is)."""

    file: str
    table: str
    columns: list[str]
    primary_key: list[str]
    rows: int
    sha256: str
    lines: list[str]


class BoardShown(TypedDict):
    """A board as the manifest holds it: a public version's board as the public is served it."""

    suite: str
    version: str
    board: boards.BoardView


class Manifest(TypedDict):
    """`manifest.json` as an export writes it (a TypedDict: serialised as it is, keys sorted).
    `manifest_sha256` is added last, over everything else."""

    format: str
    format_version: int
    kind: str
    contains_secrets: bool
    NOTICE: str
    assay_version: str
    harness_version: str
    schema_revision: str | None
    digest_version: int
    exported_at: str
    suite: str | None
    version: str | None
    files: list[FileEntry]
    excluded: dict[str, str]
    boards: list[BoardShown]
    manifest_sha256: NotRequired[str]


def _all(table: str) -> tuple[str, ...]:
    return tuple(c.name for c in metadata.tables[table].columns)


def _public_columns() -> dict[str, tuple[str, ...]]:
    columns = {p.table: p.columns for p in PARTS_V2}  # what version-2 digests hash, exactly
    columns["submissions"] = (*columns["submissions"], HANDLE)
    columns["scenario_versions"] = tuple(c for c in _all("scenario_versions")
                                         if c not in ("document", "checks_hash", "world_fingerprint", "title"))
    for table in ("run_verdicts", "batch_completions", "suite_releases", "release_scenarios", "release_rubrics",
                  "submission_finalisations", "publication_events", "variance_notes", "platform_config",
                  "measurement_eras", "remote_lines", "digest_stamps", "run_usage"):
        columns[table] = _all(table)
    return columns


PUBLIC_COLUMNS: dict[str, tuple[str, ...]] = _public_columns()
"""The tables a public export holds, and which of their columns (`seed_commitment` and
`public_handle` are computed for it). A scenario keeps its ids, version, content hash, kit,
language and freeze date: no document (briefing, world, hidden truth, checks), no title, no checks
hash or world fingerprint. A table added later is in no public export until it is named here."""

PUBLIC_WITHHELD: dict[str, str] = {
    **EXCLUDED,
    "accounts": "private: account names (a submission carries its account's public handle instead)",
    "account_handles": "private: which account holds which handle (a submission carries its current handle)",
    "seed_salts": "secret: the salts that open the runs' seed commitments",
    "submission_digests": "secret-derived: version-1 digests hash seeds and private columns (version 2 is here)",
    "run_claims": "operational: which process claimed which run",
    "unlisted_submissions": "not public: an unlisted entry is never in a public export",
}
"""Tables a public export leaves out, and why (besides these, every table not in `PUBLIC_COLUMNS`:
the panel, admins, keys)."""

FULL_NOTICE = ("FULL EXPORT: CONTAINS SECRETS (seeds and their salts, hidden truths and checks, account names, "
               "unpublished submissions). Keep it private; `assay export --public` writes what anyone may see.")
PUBLIC_NOTICE = ("PUBLIC EXPORT: only what the public may see (published, listed entries of public suites; seed "
                 "commitments instead of seeds; public handles instead of account names; no scenario documents).")


def readme_text(kind: str) -> str:
    """The README an export of `kind` holds (and `assay verify` holds it to, byte for byte)."""
    notice = FULL_NOTICE if kind == "full" else PUBLIC_NOTICE
    return (f"{notice}\n\n"
            "An Assay export: one JSON Lines file per table (one row per line, RFC 8785 canonical JSON, in\n"
            "primary-key order) and manifest.json (every file's SHA-256 and every line's, the boards as served).\n"
            "Check it with nothing but itself:\n\n"
            "    assay verify DIR\n\n"
            "It recomputes every submission's digest and every board figure from the rows and exits 0 when\n"
            "they add up; a byte changed anywhere makes it exit 1 naming the file and line.\n"
            "A planned run's seed_commitment is SHA-256 of 'assay-seed-commitment/1:<seed>:<salt>'; the\n"
            "submission's owner sees seed and salt (`assay results SUBMISSION --json`) and can open it.\n")


# -- digests ------------------------------------------------------------------------------------


def stamp(conn: sa.Connection, submission_id: str, measurement_era: str | None) -> str | None:
    """Stamp a submission being finalised with its digests (version 1 and `DIGEST_VERSION`), in
    the finalising transaction `conn`.

    Returns the version-2 digest stamped, or None when the submission already has one (a digest is
    stamped once and never replaced)."""
    rows = ExportRepo.digest_rows(conn, submission_id, PARTS_V1)
    release = ExportRepo.release_of(conn, submission_id)
    ExportRepo.add_digest(conn, submission_id, submission_digest(release, measurement_era, rows, version=1))
    salts = ExportRepo.salts(conn, [submission_id])
    if any(r["run_id"] not in salts for r in rows["planned_runs"]):
        return None  # a run planned with no salt (only rows written behind the store's back): no commitment
    public: dict[str, Iterable[Row]] = {**rows, "planned_runs": with_commitments(rows["planned_runs"], salts)}
    digest = submission_digest(release, measurement_era, public, version=DIGEST_VERSION)
    return digest if ExportRepo.add_stamp(conn, submission_id, DIGEST_VERSION, digest) else None


def digests(store: Store, submission_ids: Iterable[str]) -> dict[str, str]:
    """{submission: its digest (the version boards show)} for the stamped ones among `submission_ids`."""
    return ExportRepo(store).digests(submission_ids)


def seed_salts(store: Store, batch_id: str) -> dict[str, str]:
    """{run id: its seed's salt} for a batch's planned runs: for its owner's eyes only."""
    return ExportRepo(store).batch_salts(batch_id)


# -- exports ------------------------------------------------------------------------------------


def exported_tables(suite: str | None = None, *, public: bool = False) -> list[sa.Table]:
    """The tables an export writes, parents before children: a full export every table but those
    of `EXCLUDED` (with `suite`, only the tables that hold anything of a suite); a public export
    those of `PUBLIC_COLUMNS`."""
    if public:
        return [t for t in metadata.sorted_tables if t.name in PUBLIC_COLUMNS]
    scoped = ExportRepo.suite_scope("") if suite is not None else None
    return [t for t in metadata.sorted_tables
            if t.name not in EXCLUDED and (scoped is None or t.name in scoped)]


def canonical_object(value: Mapping[str, Any]) -> bytes:
    """RFC 8785 bytes of a mapping with ASCII keys, member by member (the same bytes as encoding
    it whole, but only the members holding floats take the slow exact path)."""
    members = sorted((k, canonical_bytes(v)) for k, v in value.items())
    return b"{" + b",".join(json.dumps(k).encode("ascii") + b":" + v for k, v in members) + b"}"


def manifest_hash(manifest: Mapping[str, Any]) -> str:
    """SHA-256 of the manifest's canonical content without its own `manifest_sha256`."""
    return sha256_hex(canonical_object({k: v for k, v in manifest.items() if k != "manifest_sha256"}))


def manifest_text(manifest: Mapping[str, Any]) -> str:
    """How a manifest is written (and must read back, byte for byte)."""
    return json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()[:LINE_HASH_DIGITS]


def _boards(store: Store, keys: Iterable[str], version: str | None = None) -> list[BoardShown]:
    """Every public version's board of each suite (only `version`'s, when given), as the public is
    served it."""
    repo = ExportRepo(store)
    found: list[BoardShown] = []
    for key in sorted(set(keys)):
        for release in sorted((r for r in repo.releases(key) if is_listed(PUBLIC, r)),
                              key=lambda r: releases.version_key(r["version"])):
            if version is not None and release["version"] != version:
                continue
            value = boards.board(store, key, release["version"], actor=PUBLIC)
            found.append({"suite": key, "version": release["version"], "board": value})
    return found


def _write_rows(rows: Iterable[Row], table: sa.Table, columns: Iterable[str], path: Path) -> FileEntry:
    digest = hashlib.sha256()
    lines: list[str] = []
    with path.open("wb") as f:
        for row in rows:
            line = row_bytes(row)
            digest.update(line + b"\n")
            f.write(line + b"\n")
            lines.append(line_hash(line))
    return {
        "file": path.name, "table": table.name, "columns": list(columns),
        "primary_key": [c.name for c in table.primary_key.columns], "rows": len(lines),
        "sha256": digest.hexdigest(), "lines": lines,
    }


def _write_table(conn: sa.Connection, table: sa.Table, where: sa.ColumnElement[bool] | None,
                 path: Path) -> FileEntry:
    return _write_rows(ExportRepo.stream(conn, table, where), table, [c.name for c in table.columns], path)


def _write_public(conn: sa.Connection, table: sa.Table, where: sa.ColumnElement[bool], path: Path,
                  submission_ids: list[str]) -> FileEntry:
    """A table as the public sees it: its rows in scope, cut to `PUBLIC_COLUMNS`, with the seed
    commitment of a planned run and the public handle of a submission computed."""
    columns = PUBLIC_COLUMNS[table.name]
    source: Iterable[Row] = ExportRepo.stream(conn, table, where)
    if table.name == "planned_runs":
        salts = ExportRepo.salts(conn, submission_ids)
        source = (with_commitments([r], salts)[0] for r in source)
    elif table.name == "submissions":
        handles = ExportRepo.public_handles(conn, submission_ids)
        source = ({**r, HANDLE: handles[r["id"]]} for r in source)
    return _write_rows(({c: r[c] for c in columns} for r in source), table, columns, path)


def _target(out: Path) -> Path:
    """The directory to export into: new, or empty; its parent must exist."""
    if out.exists() and not out.is_dir():
        raise BadInput("exists and is not a directory", f"--out {out}")
    if out.is_dir() and any(out.iterdir()):
        raise BadInput("exists and is not empty; an export goes into a new or empty directory", f"--out {out}")
    if not out.parent.is_dir():
        raise BadInput("its parent directory does not exist", f"--out {out}")
    return out


def entry_ids(shown: BoardShown) -> list[str]:
    """The submission ids of a served board's entries, in the board's order."""
    entries = shown["board"]["entries"]
    assert isinstance(entries, list)  # every board has its entries
    return [str(e["submission_id"]) for e in entries if isinstance(e, dict)]


def _entries(found: list[BoardShown]) -> list[str]:
    return sorted({sid for b in found for sid in entry_ids(b)})


def export(store: Store, out: str | Path, *, suite: str | None = None, version: str | None = None,
           public: bool = False, on_table: Callable[[str, int], None] | None = None,
           actor: Actor) -> Manifest:
    """Write an export of the store into the new or empty directory `out`; return its manifest.
    Nothing is left at `out` when the export is refused.

    A full export (the operator's or an admin's) holds every row (of one suite's, with `suite`);
    a public export (anyone's) only what the public may see, of the public releases of `suite` (of
    every suite when None), of `version` only when given (see the module docstring).
    `on_table(file, rows)` hears each file as it is written (progress)."""
    if not public:
        require_staff(actor, "export the store (a full export holds its secrets)", "out")
        if version is not None:
            raise BadInput("a full export is of a suite, every version; --version scopes a public export", "version")
    target = _target(Path(out))
    repo = ExportRepo(store)
    if public:
        public_releases = [r for r in repo.releases(suite) if is_listed(PUBLIC, r)] if suite is not None else []
        if suite is not None and not any(version in (None, r["version"]) for r in public_releases):
            what = "no public release of that suite" + (f" at version {version}" if version is not None else "")
            raise NotFound(what, "suite", value=suite if version is None else f"{suite} {version}")
    elif suite is not None and not repo.releases(suite):
        raise NotFound("no released suite by that key", "suite", value=suite)
    tables = exported_tables(suite, public=public)
    keys = [suite] if suite is not None else sorted({r["suite_key"] for r in repo.releases()})
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for _attempt in range(ATTEMPTS):
            before = _boards(store, keys, version)
            ids = _entries(before)
            if public:
                scope = ExportRepo.public_scope(suite, ids, listed_visibilities(PUBLIC))
            else:
                scope = ExportRepo.suite_scope(suite) if suite is not None else {}
            with repo.snapshot() as conn:
                revision = ExportRepo.schema_revision(conn)
                files: list[FileEntry] = []
                for table in tables:
                    path = staging / f"{table.name}.jsonl"
                    if public:
                        entry = _write_public(conn, table, scope[table.name], path, ids)
                    else:
                        entry = _write_table(conn, table, scope.get(table.name), path)
                    files.append(entry)
                    if on_table is not None:
                        on_table(entry["file"], entry["rows"])
            after = _boards(store, keys, version)
            if canonical_bytes(before) == canonical_bytes(after):
                break
        else:
            raise Conflict(f"the store kept changing while it was exported ({ATTEMPTS} attempts); "
                           "export again when it is quiet", "out")
        kind = "public" if public else "full"
        written = {t.name for t in tables}
        excluded = ({t: PUBLIC_WITHHELD.get(t, "not public: not needed to verify a board")
                     for t in sorted(set(metadata.tables) | set(PUBLIC_WITHHELD)) if t not in written}
                    if public else EXCLUDED)
        manifest: Manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "kind": kind, "contains_secrets": not public,
            # upper case sorts first: the manifest's first line says what kind of export this is
            "NOTICE": PUBLIC_NOTICE if public else FULL_NOTICE, "assay_version": __version__,
            "harness_version": HARNESS_VERSION, "schema_revision": revision, "digest_version": DIGEST_VERSION,
            "exported_at": datetime.now(timezone.utc).isoformat(), "suite": suite, "version": version,
            "files": files, "excluded": dict(sorted(excluded.items())), "boards": after,
        }
        manifest["manifest_sha256"] = manifest_hash(manifest)
        (staging / README).write_text(readme_text(kind), encoding="utf-8")
        (staging / MANIFEST).write_text(manifest_text(manifest), encoding="utf-8")
        if target.is_dir():
            target.rmdir()  # empty, checked above
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def public_archive(store: Store, key: str, version: str, directory: str | Path, *, actor: Actor = PUBLIC) -> Path:
    """The public export of suite `key` at `version` as a gzipped tar in `directory` (which the
    caller removes): one top-level directory, `assay-export-KEY-VERSION/`, to unpack and check
    with `assay verify`. Written to disk, never held in memory. NotFound when the suite has no
    public release at that version (internal, unlisted or missing: the same answer)."""
    import tarfile

    root = Path(directory)
    name = f"assay-export-{key}-{version}"
    if Path(name).name != name or name.startswith("."):
        raise NotFound("no public release of that suite", "suite", value=f"{key} {version}")
    export(store, root / name, suite=key, version=version, public=True, actor=actor)
    archive = root / f"{name}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(root / name, arcname=name)
    shutil.rmtree(root / name)
    return archive
