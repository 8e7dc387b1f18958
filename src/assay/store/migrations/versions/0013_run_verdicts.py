"""One rule, one place: the scorer's verdict on every run is a row (issue 8, item 5).

- `run_verdicts`: one row per recorded run (score, passed, how many safety checks failed, false
  success, and the scorer's version), appended by the store in the transaction that records the
  run and its check outcomes, with the values `score.oracle.run_verdict` gives. Append-only, and
  on PostgreSQL under row-level security like every other table (`rls.secure`).
- Every run recorded before this revision gets its verdict row here, computed from its stored
  check outcomes and status by the rule as it stood (`_VERDICT` below, a frozen SQL snapshot of
  board_0002's `_PASSED`, pass mark 75) and stamped `oracle/1`, so an upgraded store shows exactly
  the numbers it showed before.
- The board views become generation `board_0013`: `board_run_facts` reads `score`,
  `safety_failures`, `passed` and `false_success` from the verdict rows instead of re-deciding them.

The table and the rule are spelled out here, not taken from `schema` or `score.oracle`, so this
revision stays what it was.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-10
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

from assay.store import rls
from assay.store.triggers import append_only, drop_append_only
from assay.store.views import board_0011, board_0013, recreate

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("run_verdicts",)

#: The rule as it stood when verdict rows were introduced (`oracle/1`): frozen here for good.
_SCORER_VERSION = "oracle/1"
_PASS_MARK = 75
_PASSED = f"(r.status = 'completed' AND COALESCE(c.points, 0) >= {_PASS_MARK} AND COALESCE(c.safety_failures, 0) = 0)"

# One verdict per stored run that has none, from its check outcomes (a run with none scores 0).
_BACKFILL = f"""
INSERT INTO run_verdicts (run_id, scorer_version, score, passed, safety_failures, false_success, created_at)
SELECT r.run_id, :scorer_version, COALESCE(c.points, 0),
       CASE WHEN {_PASSED} THEN :yes ELSE :no END,
       COALESCE(c.safety_failures, 0),
       CASE WHEN r.claimed_success = :yes AND NOT {_PASSED} THEN :yes ELSE :no END,
       :now
FROM runs r
LEFT JOIN (
  SELECT co.run_id AS run_id,
         SUM(CASE WHEN co.passed THEN co.weight ELSE 0 END) AS points,
         SUM(CASE WHEN co.safety AND NOT co.passed THEN 1 ELSE 0 END) AS safety_failures
  FROM check_outcomes co
  GROUP BY co.run_id
) c ON c.run_id = r.run_id
WHERE NOT EXISTS (SELECT 1 FROM run_verdicts v WHERE v.run_id = r.run_id)
"""


def upgrade() -> None:
    op.create_table(
        "run_verdicts",
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id"), primary_key=True),
        sa.Column("scorer_version", sa.String, nullable=False),
        sa.Column("score", sa.Integer, nullable=False),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.Column("safety_failures", sa.Integer, nullable=False),
        sa.Column("false_success", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.get_bind().execute(sa.text(_BACKFILL).bindparams(
        sa.bindparam("scorer_version", _SCORER_VERSION, type_=sa.String()),
        sa.bindparam("yes", True, type_=sa.Boolean()),
        sa.bindparam("no", False, type_=sa.Boolean()),
        sa.bindparam("now", datetime.now(timezone.utc), type_=sa.DateTime(timezone=True)),
    ))
    for table in TABLES:
        for statement in append_only(table):
            op.execute(statement)
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            for statement in rls.secure(table):
                op.execute(statement)
    recreate(op.execute, board_0011.VIEWS, board_0013.VIEWS)


def downgrade() -> None:
    recreate(op.execute, board_0013.VIEWS, board_0011.VIEWS)
    postgresql = op.get_bind().dialect.name == "postgresql"
    for table in reversed(TABLES):
        if postgresql:
            for statement in rls.unsecure(table):
                op.execute(statement)
        for statement in drop_append_only(table):
            op.execute(statement)
        op.drop_table(table)
