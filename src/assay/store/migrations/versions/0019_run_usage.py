"""Tokens and cost on every run (issue 28, item 2).

- `run_usage`: the model usage of a run, one row per (run, role, model) as it was recorded: the
  agent's with the run (measured by the `openai:` agent, or reported by the agent itself and
  marked `self_reported`), a model judge's with each pass, a model facilitator's with the run.
  Prompt, completion and cached tokens, calls and latency; never a price (prices are
  `platform_config` rows, `price/MODEL`, and a cost is derived when read). A result: append-only,
  and on PostgreSQL under row-level security like every other table.

Everything is spelled out here as literal SQL, so this revision stays what it was.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SQLITE = (
    "CREATE TRIGGER run_usage_append_only_update BEFORE UPDATE ON run_usage "
    "BEGIN SELECT RAISE(ABORT, 'assay: run_usage is append-only'); END",
    "CREATE TRIGGER run_usage_append_only_delete BEFORE DELETE ON run_usage "
    "BEGIN SELECT RAISE(ABORT, 'assay: run_usage is append-only'); END",
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
    "CREATE TRIGGER run_usage_append_only BEFORE UPDATE OR DELETE ON run_usage "
    "FOR EACH ROW EXECUTE FUNCTION assay_append_only()",
    "CREATE TRIGGER run_usage_append_only_truncate BEFORE TRUNCATE ON run_usage "
    "FOR EACH STATEMENT EXECUTE FUNCTION assay_append_only()",
    "ALTER TABLE run_usage ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE run_usage FORCE ROW LEVEL SECURITY",
    "CREATE POLICY assay_service_read ON run_usage FOR SELECT TO assay_service USING (true)",
    "CREATE POLICY assay_service_append ON run_usage FOR INSERT TO assay_service WITH CHECK (true)",
    "CREATE POLICY assay_owner_all ON run_usage FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true)",
)
_POSTGRESQL_DOWN = (
    "DROP POLICY IF EXISTS assay_service_read ON run_usage",
    "DROP POLICY IF EXISTS assay_service_append ON run_usage",
    "DROP POLICY IF EXISTS assay_owner_all ON run_usage",
    "ALTER TABLE run_usage NO FORCE ROW LEVEL SECURITY",
    "ALTER TABLE run_usage DISABLE ROW LEVEL SECURITY",
    "DROP TRIGGER IF EXISTS run_usage_append_only ON run_usage",
    "DROP TRIGGER IF EXISTS run_usage_append_only_truncate ON run_usage",
)


def upgrade() -> None:
    op.create_table(
        "run_usage",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), nullable=False),
        sa.Column("role", sa.String, nullable=False),
        sa.Column("model", sa.String, nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger, nullable=False),
        sa.Column("completion_tokens", sa.BigInteger, nullable=False),
        sa.Column("cached_tokens", sa.BigInteger, nullable=False),
        sa.Column("calls", sa.Integer, nullable=False),
        sa.Column("latency_ms", sa.BigInteger, nullable=False),
        sa.Column("self_reported", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_run_usage_run", "run_usage", ["run_id"])
    postgresql = op.get_bind().dialect.name == "postgresql"
    for statement in _POSTGRESQL if postgresql else _SQLITE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in _POSTGRESQL_DOWN:
            op.execute(statement)
    else:
        op.execute("DROP TRIGGER IF EXISTS run_usage_append_only_update")
        op.execute("DROP TRIGGER IF EXISTS run_usage_append_only_delete")
    op.drop_index("ix_run_usage_run", "run_usage")
    op.drop_table("run_usage")
