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


revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APPEND_ONLY = ("api_keys", "key_revocations")


# -- frozen SQL ---------------------------------------------------------------------------------
# What the live helpers (`assay.store.triggers`) produced at this revision, copied here so that a
# later change to them cannot change what this migration does
# (tests/store/test_frozen_migrations.py).

_PG_APPEND_ONLY_FUNCTION = """
CREATE OR REPLACE FUNCTION assay_append_only() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    RAISE EXCEPTION USING
        MESSAGE = 'assay: ' || TG_TABLE_NAME || ' is append-only',
        ERRCODE = 'restrict_violation';
END;
$body$
"""


def append_only(table: str) -> list[str]:
    """What `assay.store.triggers.append_only(table)` gave at this revision: DDL that makes `table`
    refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL)."""
    if op.get_bind().dialect.name == "sqlite":
        return [
            f"CREATE TRIGGER {table}_append_only_update BEFORE UPDATE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'assay: {table} is append-only'); END",
            f"CREATE TRIGGER {table}_append_only_delete BEFORE DELETE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'assay: {table} is append-only'); END",
        ]
    return [
        _PG_APPEND_ONLY_FUNCTION,
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION assay_append_only()",
        f"CREATE TRIGGER {table}_append_only_truncate BEFORE TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION assay_append_only()",
    ]


def drop_append_only(table: str) -> list[str]:
    """What `assay.store.triggers.drop_append_only(table)` gave at this revision."""
    if op.get_bind().dialect.name == "sqlite":
        return [
            f"DROP TRIGGER IF EXISTS {table}_append_only_update",
            f"DROP TRIGGER IF EXISTS {table}_append_only_delete",
        ]
    return [
        f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}",
        f"DROP TRIGGER IF EXISTS {table}_append_only_truncate ON {table}",
    ]


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
