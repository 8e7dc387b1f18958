"""Remote play's sweeps and leases without a scan (issue 26, item 3).

Two questions were asked of whole tables: which remote runs are leased and not recorded (every
lease asks it for its account, and the sweeper for all, to end runs left idle: it joined every
planned run to its latest claim), and which batches have all their runs recorded but were never
completed (the sweeper's, every few seconds: every batch against its completion). Now:

- the live remote leases are found from their holders: `claim_holders` rows not ended, by host (a
  partial index: only the holders not ended are in it, so it stays as small as what is in play),
  then their claims by holder (`run_claims.holder`);
- the batches a sweep looks at are those with a run recorded lately (`runs.created_at`), besides
  a whole scan now and then (`completion.complete_recorded`).

No row changes; the tables stay append-only.

Everything is spelled out here as literal SQL, so this revision stays what it was.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEXES = (
    ("ix_claim_holders_live", "CREATE INDEX ix_claim_holders_live ON claim_holders (host) WHERE ended_at IS NULL"),
    ("ix_run_claims_holder", "CREATE INDEX ix_run_claims_holder ON run_claims (holder)"),
    ("ix_runs_created_at", "CREATE INDEX ix_runs_created_at ON runs (created_at)"),
)


def upgrade() -> None:
    for _name, statement in _INDEXES:
        op.execute(statement)


def downgrade() -> None:
    for name, _statement in reversed(_INDEXES):
        op.execute(f"DROP INDEX {name}")
