"""Tamper-evident entries and exports (issue 12, item 6): the digest a submission is stamped with
when finalised, and `assay export`, the store's append-only rows as files anyone can verify.

**Digests.** `stamp(conn, submission_id, era)` runs inside the transaction that finalises a
submission (`submissions.complete`): it reads every row recorded for the submission as that
transaction sees them (`ExportRepo.digest_rows`, the parts of `assay.stats.digest.PARTS`) and
stores their digest in `submission_digests`, once. The board entry and the owner view show it.

**Exports.** `export(store, out, suite=…)` writes one JSON Lines file per append-only table, every
row in primary-key order as its RFC 8785 canonical JSON (`stats.digest.row_bytes`: the very bytes
a digest hashes), and `manifest.json`: the harness and schema revision, per file its table,
columns, primary key, row count, SHA-256 and the SHA-256 (first 16 hex digits) of every line, and
each exported suite's boards as the public is served them, for every public version. The manifest
carries the SHA-256 of its own canonical content (`manifest_sha256`), so a change anywhere in it is
seen too. With `suite`, only the rows of that suite's releases and submissions (and the platform's
config and eras, in force for every suite).

Rows are read in one snapshot; the boards are read before and after it and must agree, so a
submission finalised half-way through an export cannot leave a board its rows do not support
(the export is retried, then refused).

Not exported (`EXCLUDED`): credentials (admin password hashes, session and key digests), the panel
applicants' personal data, and `claim_holders`, the one table that is updated in place.
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
from typing import Any

import sqlalchemy as sa

from assay import HARNESS_VERSION, __version__
from assay.canonical import canonical_bytes, sha256_hex
from assay.errors import BadInput, Conflict, NotFound
from assay.service import board as boards
from assay.service import releases
from assay.service.actors import PUBLIC, Actor, require_staff
from assay.stats.digest import DIGEST_VERSION, PARTS, submission_digest, row_bytes
from assay.store.db import Store
from assay.store.export_repo import ExportRepo
from assay.store.schema import metadata

FORMAT = "assay-export"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
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
}
"""Tables an export leaves out, and why. Every other table is append-only and exported."""


# -- digests ------------------------------------------------------------------------------------


def stamp(conn: sa.Connection, submission_id: str, measurement_era: str | None) -> str | None:
    """Stamp a submission being finalised with its digest, in the finalising transaction `conn`.

    Returns the digest stamped, or None when the submission already has one (a digest is stamped
    once and never replaced)."""
    rows = ExportRepo.digest_rows(conn, submission_id, PARTS)
    digest = submission_digest(ExportRepo.release_of(conn, submission_id), measurement_era, rows)
    return digest if ExportRepo.add_digest(conn, submission_id, digest) else None


def digests(store: Store, submission_ids: Iterable[str]) -> dict[str, str]:
    """{submission: its digest} for the stamped ones among `submission_ids`."""
    return ExportRepo(store).digests(submission_ids)


# -- exports ------------------------------------------------------------------------------------


def exported_tables(suite: str | None = None) -> list[sa.Table]:
    """The tables an export writes, parents before children (every table is append-only but those
    of `EXCLUDED`); with `suite`, only the tables that hold anything of a suite."""
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


def _boards(store: Store, keys: Iterable[str]) -> list[dict[str, Any]]:
    """Every public version's board of each suite, as the public is served it."""
    repo = ExportRepo(store)
    found = []
    for key in sorted(set(keys)):
        for release in sorted((r for r in repo.releases(key) if r["visibility"] == "public"),
                              key=lambda r: releases.version_key(r["version"])):
            value = boards.board(store, key, release["version"], actor=PUBLIC)
            found.append({"suite": key, "version": release["version"], "board": value})
    return found


def _write_table(conn: sa.Connection, table: sa.Table, where: sa.ColumnElement[bool] | None,
                 path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    lines: list[str] = []
    with path.open("wb") as f:
        for row in ExportRepo.stream(conn, table, where):
            line = row_bytes(row)
            digest.update(line + b"\n")
            f.write(line + b"\n")
            lines.append(line_hash(line))
    return {
        "file": path.name, "table": table.name, "columns": [c.name for c in table.columns],
        "primary_key": [c.name for c in table.primary_key.columns], "rows": len(lines),
        "sha256": digest.hexdigest(), "lines": lines,
    }


def _target(out: Path) -> Path:
    """The directory to export into: new, or empty; its parent must exist."""
    if out.exists() and not out.is_dir():
        raise BadInput("exists and is not a directory", f"--out {out}")
    if out.is_dir() and any(out.iterdir()):
        raise BadInput("exists and is not empty; an export goes into a new or empty directory", f"--out {out}")
    if not out.parent.is_dir():
        raise BadInput("its parent directory does not exist", f"--out {out}")
    return out


def export(store: Store, out: str | Path, *, suite: str | None = None,
           on_table: Callable[[str, int], None] | None = None, actor: Actor) -> dict[str, Any]:
    """Write an export of the store (of one suite's rows) into the new or empty directory `out`;
    return its manifest. Nothing is left at `out` when the export is refused.

    `on_table(file, rows)` hears each file as it is written (progress)."""
    require_staff(actor, "export the store", "out")
    target = _target(Path(out))
    repo = ExportRepo(store)
    if suite is not None and not repo.releases(suite):
        raise NotFound("no released suite by that key", "suite", value=suite)
    tables = exported_tables(suite)
    scope = ExportRepo.suite_scope(suite) if suite is not None else {}
    keys = [suite] if suite is not None else sorted({r["suite_key"] for r in repo.releases()})
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for _attempt in range(ATTEMPTS):
            before = _boards(store, keys)
            with repo.snapshot() as conn:
                revision = ExportRepo.schema_revision(conn)
                files = []
                for table in tables:
                    entry = _write_table(conn, table, scope.get(table.name), staging / f"{table.name}.jsonl")
                    files.append(entry)
                    if on_table is not None:
                        on_table(entry["file"], entry["rows"])
            after = _boards(store, keys)
            if canonical_bytes(before) == canonical_bytes(after):
                break
        else:
            raise Conflict(f"the store kept changing while it was exported ({ATTEMPTS} attempts); "
                           "export again when it is quiet", "out")
        manifest: dict[str, Any] = {
            "format": FORMAT, "format_version": FORMAT_VERSION, "assay_version": __version__,
            "harness_version": HARNESS_VERSION, "schema_revision": revision, "digest_version": DIGEST_VERSION,
            "exported_at": datetime.now(timezone.utc).isoformat(), "suite": suite,
            "files": files, "excluded": dict(sorted(EXCLUDED.items())), "boards": after,
        }
        manifest["manifest_sha256"] = manifest_hash(manifest)
        (staging / MANIFEST).write_text(manifest_text(manifest), encoding="utf-8")
        if target.is_dir():
            target.rmdir()  # empty, checked above
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest
