"""The production role's grants cover what the service does, and `alembic_version` is the owner's (issue 23).

PostgreSQL only (SQLite has no roles):

- `claim_holders` is the one table the code UPDATEs (a holder's heartbeat, and its end: every
  remote lease and every `assay run` ends its holder). `assay_service` may now UPDATE those two
  columns, `heartbeat_at` and `ended_at`, through a policy of its own; no other column, no DELETE,
  no TRUNCATE, and no other table (result tables stay append-only: no grant, no policy, and their
  triggers).
- `alembic_version` is written by migrations only, as the tables' owner. 0008 gave the service
  role INSERT on it like on every table; that is taken back (SELECT stays: opening a store at head
  reads it), and its append policy dropped, so no role but the owner matches a row to change.
  TRUNCATE ignores row-level security, so a trigger refuses it outright (Alembic never truncates).

Spelled out as literal SQL, not taken from `store.rls`, so this revision stays what it was.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UPGRADE = (
    "GRANT UPDATE (heartbeat_at, ended_at) ON claim_holders TO assay_service",
    "CREATE POLICY assay_service_liveness ON claim_holders FOR UPDATE TO assay_service "
    "USING (true) WITH CHECK (true)",
    "DROP POLICY IF EXISTS assay_service_append ON alembic_version",
    "REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON alembic_version FROM assay_service",
    """
CREATE OR REPLACE FUNCTION assay_keep_revision() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    RAISE EXCEPTION USING
        MESSAGE = 'assay: alembic_version may not be truncated (it holds the store''s schema revision)',
        ERRCODE = 'insufficient_privilege';
END;
$body$
""",
    "CREATE TRIGGER alembic_version_keep BEFORE TRUNCATE ON alembic_version "
    "FOR EACH STATEMENT EXECUTE FUNCTION assay_keep_revision()",
)

DOWNGRADE = (
    "DROP TRIGGER IF EXISTS alembic_version_keep ON alembic_version",
    "DROP FUNCTION IF EXISTS assay_keep_revision()",
    "GRANT INSERT ON alembic_version TO assay_service",
    "CREATE POLICY assay_service_append ON alembic_version FOR INSERT TO assay_service WITH CHECK (true)",
    "DROP POLICY IF EXISTS assay_service_liveness ON claim_holders",
    "REVOKE UPDATE (heartbeat_at, ended_at) ON claim_holders FROM assay_service",
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in DOWNGRADE:
            op.execute(statement)
