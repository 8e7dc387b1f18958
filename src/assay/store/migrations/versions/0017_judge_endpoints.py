"""The endpoint a submission's model judge was asked at, so a later `assay score` asks it again.

- `judge_endpoints`: one row each time a submission is scored by a model judge at an endpoint it
  was not scored at before (its base URL without credentials; never a key); the latest row is the
  endpoint `assay score` reuses when no `--judge-base-url` is given. Operator configuration, not
  a result: no digest or export covers it. Append-only, and on PostgreSQL under row-level security
  like every other table.

Everything is spelled out here as literal SQL, so this revision stays what it was.

Revision ID: 0017
Revises: 0014
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQLITE = (
    "CREATE TRIGGER judge_endpoints_append_only_update BEFORE UPDATE ON judge_endpoints "
    "BEGIN SELECT RAISE(ABORT, 'assay: judge_endpoints is append-only'); END",
    "CREATE TRIGGER judge_endpoints_append_only_delete BEFORE DELETE ON judge_endpoints "
    "BEGIN SELECT RAISE(ABORT, 'assay: judge_endpoints is append-only'); END",
)
_POSTGRESQL = (
    """CREATE OR REPLACE FUNCTION assay_append_only() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    RAISE EXCEPTION USING
        MESSAGE = 'assay: ' || TG_TABLE_NAME || ' is append-only',
        ERRCODE = 'restrict_violation';
END;
$body$""",
    "CREATE TRIGGER judge_endpoints_append_only BEFORE UPDATE OR DELETE ON judge_endpoints "
    "FOR EACH ROW EXECUTE FUNCTION assay_append_only()",
    "CREATE TRIGGER judge_endpoints_append_only_truncate BEFORE TRUNCATE ON judge_endpoints "
    "FOR EACH STATEMENT EXECUTE FUNCTION assay_append_only()",
    "ALTER TABLE judge_endpoints ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE judge_endpoints FORCE ROW LEVEL SECURITY",
    "CREATE POLICY assay_service_read ON judge_endpoints FOR SELECT TO assay_service USING (true)",
    "CREATE POLICY assay_service_append ON judge_endpoints FOR INSERT TO assay_service WITH CHECK (true)",
    "CREATE POLICY assay_owner_all ON judge_endpoints FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true)",
)
_POSTGRESQL_DOWN = (
    "DROP POLICY IF EXISTS assay_service_read ON judge_endpoints",
    "DROP POLICY IF EXISTS assay_service_append ON judge_endpoints",
    "DROP POLICY IF EXISTS assay_owner_all ON judge_endpoints",
    "ALTER TABLE judge_endpoints NO FORCE ROW LEVEL SECURITY",
    "ALTER TABLE judge_endpoints DISABLE ROW LEVEL SECURITY",
    "DROP TRIGGER IF EXISTS judge_endpoints_append_only ON judge_endpoints",
    "DROP TRIGGER IF EXISTS judge_endpoints_append_only_truncate ON judge_endpoints",
)


def upgrade() -> None:
    op.create_table(
        "judge_endpoints",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("base_url", sa.String, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Index("ix_judge_endpoints_submission", "submission_id"),
    )
    postgresql = op.get_bind().dialect.name == "postgresql"
    for statement in _POSTGRESQL if postgresql else _SQLITE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in _POSTGRESQL_DOWN:
            op.execute(statement)
    else:
        op.execute("DROP TRIGGER IF EXISTS judge_endpoints_append_only_update")
        op.execute("DROP TRIGGER IF EXISTS judge_endpoints_append_only_delete")
    op.drop_table("judge_endpoints")
