"""Builders for board tests: a small suite on disk, accounts, submissions, and a store copier."""

from __future__ import annotations

from assay.service.actors import OPERATOR

import shutil
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import yaml

from assay.agents.loader import load_agent
from assay.service import accounts, submissions
from assay.store import Store
from assay.store.schema import metadata

REPO = Path(__file__).resolve().parents[2]
FORGE = REPO / "src" / "assay" / "suites" / "forge"
AGENTS = Path(__file__).resolve().parent / "agents" / "flaky.py"
MINI_CASES = ("all-quiet.yaml", "wrong-fix.yaml")


def mini_suite(root: Path, *, key: str = "mini", version: str = "1.0", reps: int = 2,
               visibility: str = "public", language: str = "en", **extra: Any) -> Path:
    """A two-scenario suite (copied from forge) in `root`; returns the suite directory."""
    root.mkdir(parents=True, exist_ok=True)
    for name in MINI_CASES:
        if not (root / name).exists():
            shutil.copy(FORGE / name, root / name)
    doc: dict[str, Any] = {
        "key": key, "version": version, "title": f"Mini {key}", "language": language,
        "visibility": visibility, "reps_per_scenario": reps, "scenarios": list(MINI_CASES),
        "facilitator_model": "facilitator-model-1",
        "judge": {"model": "judge-model-1", "prompt_version": 4},
        "owner": "owner",
        "baselines": [{"agent": "reference:diligent", "label": "diligent", "note": "scripted"}],
        "known_limitations": ["Two scenarios only."],
        "card": "A small suite for tests.",
        **extra,
    }
    (root / "suite.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return root


def edit_scenario(root: Path, name: str = "all-quiet.yaml") -> None:
    """Change a scenario's briefing (not its checks, which are frozen): a new content hash."""
    path = root / name
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("with an honest account", "with a short, honest account"),
                    encoding="utf-8")
    assert path.read_text(encoding="utf-8") != text


def set_version(root: Path, version: str, **changes: Any) -> None:
    doc = yaml.safe_load((root / "suite.yaml").read_text(encoding="utf-8"))
    doc.update(version=version, **changes)
    (root / "suite.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def account(store: Store, name: str, handle: str | None = None) -> None:
    accounts.create(store, name, handle, actor=OPERATOR)


def submit(store: Store, key: str = "mini", *, agent: str = "reference:diligent", account: str = "alice",
           label: str | None = None, **kwargs: Any) -> str:
    # a flaky agent misbehaves on the first run of its process: one sandboxed worker plays them all
    workers = kwargs.pop("workers", 1 if agent.startswith(flaky("")) else 2)
    return submissions.submit(store, key, factory=load_agent(agent), account=account,
                              label=label or agent.rsplit(":", 1)[-1], workers=workers, **kwargs, actor=OPERATOR)


def flaky(name: str) -> str:
    return f"python:{AGENTS}:{name}"


def row_counts(store: Store) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {t: conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar_one()
                for t in sa.inspect(conn).get_table_names() if t != "alembic_version"}


def copy_rows(source: Store, target: Store) -> None:
    """Copy every row of every table from one store to another, parents first, ids and all."""
    import assay.store.board_schema  # noqa: F401 - registers the board tables on `metadata`

    with source.engine.connect() as src, target.engine.begin() as dst:
        for table in metadata.sorted_tables:
            rows = [dict(r._mapping) for r in src.execute(sa.select(table))]
            if rows:
                dst.execute(sa.insert(table), rows)
        if dst.dialect.name == "postgresql":  # keep the serial counters past the copied ids
            for table in metadata.sorted_tables:
                col = table.c.get("id")
                if col is not None and isinstance(col.type, sa.Integer):
                    dst.execute(sa.text(
                        f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                        f"COALESCE((SELECT MAX(id) FROM {table.name}), 1))"))


def recounted_ranks(entries: list[dict[str, Any]]) -> list[int | None]:
    """Each entry's rank by the board's rule, recounted from the JSON alone: 1 + the number of
    ranked entries whose pass_rate_ci lies wholly above this entry's (their lo > this hi)."""
    ranked = [e for e in entries if e["rank"] is not None]
    return [None if e["rank"] is None else 1 + sum(1 for o in ranked if o["pass_rate_ci"][0] > e["pass_rate_ci"][1])
            for e in entries]
