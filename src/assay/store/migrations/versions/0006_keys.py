"""Keys: API keys (submitters) and agent keys (agents), stored as HMAC-SHA256 under the server
secret, revocable by an appended revocation (issue 10).

- `api_keys`: one row per key ever issued: its account, kind (`api` | `agent`), a display prefix
  and the digest; never the key itself. Append-only.
- `key_revocations`: one row per revoked key (the key is refused from that row on). Append-only,
  so a revocation cannot be undone by editing a row; a key once revoked stays revoked.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from assay.store.triggers import append_only, drop_append_only

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = ("api_keys", "key_revocations")


def _ts() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("account", sa.String, sa.ForeignKey("accounts.name"), nullable=False),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("prefix", sa.String(32), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
        sa.UniqueConstraint("digest", name="uq_api_keys_digest"),
        sa.CheckConstraint("kind IN ('api', 'agent')", name="ck_api_keys_kind"),
    )
    op.create_index("ix_api_keys_prefix", "api_keys", ["prefix"])
    op.create_index("ix_api_keys_account", "api_keys", ["account"])
    op.create_table(
        "key_revocations",
        sa.Column("key_id", sa.String(32), sa.ForeignKey("api_keys.id"), primary_key=True),
        sa.Column("revoked_at", _ts(), nullable=False),
    )
    for table in APPEND_ONLY:
        for statement in append_only(table):
            op.execute(statement)


def downgrade() -> None:
    for table in APPEND_ONLY:
        for statement in drop_append_only(table):
            op.execute(statement)
    op.drop_table("key_revocations")
    op.drop_index("ix_api_keys_account", "api_keys")
    op.drop_index("ix_api_keys_prefix", "api_keys")
    op.drop_table("api_keys")
