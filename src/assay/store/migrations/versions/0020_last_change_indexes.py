"""The board's last change, read without a scan (issue 26, item 3).

Every public read asks the store what the board was last changed by (`BoardRepo.last_change`),
the key of the web's read cache and ETags: the latest `created_at` of the stored figures and of
the events that list, label or date an entry. Without an index each of those maxima is a scan of
its table (on PostgreSQL at 100,000 entries, `entry_figures` alone is hundreds of megabytes), so
each table gets an index on `created_at`: a maximum is then one step down a b-tree, on both
backends. No row changes; the tables stay append-only (`entry_figures`, derived, stays replaced).

Everything is spelled out here as literal SQL, so this revision stays what it was.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEXES = (
    ("ix_entry_figures_created", "entry_figures"),
    ("ix_publication_events_created", "publication_events"),
    ("ix_account_handles_created", "account_handles"),
    ("ix_unlisted_submissions_created", "unlisted_submissions"),
    ("ix_digest_stamps_created", "digest_stamps"),
)


def upgrade() -> None:
    for name, table in _INDEXES:
        op.execute(f"CREATE INDEX {name} ON {table} (created_at)")


def downgrade() -> None:
    for name, _table in reversed(_INDEXES):
        op.execute(f"DROP INDEX {name}")
