"""Builders for export tests: a populated store, its rows as an export holds them, a forger's tools."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from assay.agents.loader import load_agent
from assay.service import accounts, exports, scoring, submissions
from assay.service.actors import OPERATOR
from assay.stats.digest import row_bytes
from assay.store import Store
from assay.store.export_repo import ExportRepo

from tests.board._support import AGENTS

MIXED = f"python:{AGENTS.parent / 'mixed.py'}:Mixed"


def submit(store: Store, key: str, agent: str, account: str, label: str, *, publish: bool = True,
           score: bool = False) -> str:
    sid = submissions.submit(store, key, factory=load_agent(agent), account=account, label=label,
                             publish=publish, workers=2, actor=OPERATOR)
    if score:
        scoring.score(store, sid, actor=OPERATOR)
    return sid


def populate(store: Store, *, academy: bool = True) -> dict[str, str]:
    """Forge: a diligent, a mixed and an idle entry on the board, an unpublished hasty one; an
    unranked (bring-your-own) submission is left out for speed. Academy (when asked): a steadfast
    entry judged by the rules judge. A variance note on the mixed entry. {label: submission id}."""
    for name, handle in (("alice", "Alice"), ("bob", "Bob"), ("carol", "Carol"), ("dave", None)):
        accounts.create(store, name, handle, actor=OPERATOR)
    ids = {
        "diligent": submit(store, "forge", "reference:diligent", "alice", "diligent"),
        "mixed": submit(store, "forge", MIXED, "bob", "mixed"),
        "idle": submit(store, "forge", "reference:idle", "carol", "idle"),
        "hasty": submit(store, "forge", "reference:hasty", "dave", "hasty", publish=False),
    }
    if academy:
        ids["steadfast"] = submit(store, "academy", "reference:steadfast", "alice", "steadfast", score=True)
    submissions.note(store, ids["mixed"], "two runs were replayed by hand", actor=OPERATOR)
    return ids


def tables_of(store: Store) -> dict[str, list[dict[str, Any]]]:
    """Every exported table's rows, read back exactly as an export's lines read back."""
    with ExportRepo(store).snapshot() as conn:
        return {t.name: [json.loads(row_bytes(r)) for r in ExportRepo.stream(conn, t)]
                for t in exports.exported_tables()}


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def reseal(root: Path) -> None:
    """What a careful forger does after editing rows: rewrite the manifest's counts and hashes so
    every line is "as exported" again. Only the digests and the boards can then tell."""
    manifest = json.loads((root / exports.MANIFEST).read_text(encoding="utf-8"))
    for entry in manifest["files"]:
        data = (root / entry["file"]).read_bytes()
        rows = data.splitlines()
        entry.update(rows=len(rows), sha256=hashlib.sha256(data).hexdigest(),
                     lines=[exports.line_hash(r) for r in rows])
    manifest["manifest_sha256"] = exports.manifest_hash(manifest)
    (root / exports.MANIFEST).write_text(exports.manifest_text(manifest), encoding="utf-8")


def rewrite_rows(root: Path, table: str, change: Any) -> None:
    """Apply `change(row) -> row | None` to every row of a table's file, canonical as exported."""
    path = root / f"{table}.jsonl"
    out = []
    for raw in path.read_bytes().splitlines():
        row = change(json.loads(raw))
        if row is not None:
            out.append(row_bytes(row) + b"\n")
    path.write_bytes(b"".join(out))
