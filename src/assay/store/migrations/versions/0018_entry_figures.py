"""One implementation of every board figure, stored per entry (issue 24, item 2).

- The board views become generation `board_0018`: `board_run_facts` is one plain row per planned
  run of a submission (verdict, sweep and its participation floor, ranked-eligibility mark, check
  and win-condition counts, judge state), with no figure; `board_case_facts`,
  `board_submission_facts`, `board_entries` and `board_unlisted_entries`, which computed the
  figures a second time in SQL, are dropped. Every figure is computed in Python (`stats.board`).
- `entry_figures`: each finalised submission's figures and intervals, written when it completes and
  again only when what it depends on changes. Derived, not a result: the one table whose rows the
  service replaces, so it has no append-only trigger; on PostgreSQL it is under row-level security
  like every table, and the service role may also DELETE its rows (a replacement is a DELETE and an
  INSERT), through a policy of its own (`assay_service_replace`), and UPDATE its `listed` column
  (whether the public board lists the entry now, recomputed when a publication or handle event is
  appended), through `assay_service_relist`. It starts empty: the service fills
  it for the finalised submissions of a release the first time that board is read (or
  `assay board --recompute` does), from the rows.
Spelled out here (the table, and the grants as literal SQL), so this revision stays what it was.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from assay.store import rls
from assay.store.views import board_0013, board_0018, recreate

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_POSTGRESQL = (
    "GRANT DELETE ON entry_figures TO assay_service",
    "CREATE POLICY assay_service_replace ON entry_figures FOR DELETE TO assay_service USING (true)",
    "GRANT UPDATE (listed) ON entry_figures TO assay_service",
    "CREATE POLICY assay_service_relist ON entry_figures FOR UPDATE TO assay_service USING (true) WITH CHECK (true)",
)
_POSTGRESQL_DOWN = (
    "DROP POLICY IF EXISTS assay_service_relist ON entry_figures",
    "REVOKE UPDATE (listed) ON entry_figures FROM assay_service",
    "DROP POLICY IF EXISTS assay_service_replace ON entry_figures",
    "REVOKE DELETE ON entry_figures FROM assay_service",
)


def upgrade() -> None:
    op.create_table(
        "entry_figures",
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
        sa.Column("release_id", sa.Integer, sa.ForeignKey("suite_releases.id"), nullable=False),
        sa.Column("method", sa.String, nullable=False),
        sa.Column("complete", sa.Boolean, nullable=False),
        sa.Column("ranked", sa.Boolean, nullable=False),
        sa.Column("listed", sa.Boolean, nullable=False),
        sa.Column("order_key", sa.String, nullable=False),
        sa.Column("rank_low", sa.Float, nullable=True),
        sa.Column("rank_high", sa.Float, nullable=True),
        sa.Column("figures", sa.Text, nullable=False),
        sa.Column("shown", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    # one at a time, in this order (indexes given to create_table are a set: their order, and so the
    # schema snapshot's, would change from run to run)
    op.create_index("ix_entry_figures_order", "entry_figures", ["release_id", "listed", "order_key"])
    op.create_index("ix_entry_figures_rank", "entry_figures", ["release_id", "listed", "ranked", "rank_low"])
    recreate(op.execute, board_0013.VIEWS, board_0018.VIEWS)
    if op.get_bind().dialect.name == "postgresql":
        for statement in (*rls.secure("entry_figures"), *_POSTGRESQL):
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in (*_POSTGRESQL_DOWN, *rls.unsecure("entry_figures")):
            op.execute(statement)
    recreate(op.execute, board_0018.VIEWS, board_0013.VIEWS)
    op.drop_table("entry_figures")
