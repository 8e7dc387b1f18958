"""Append-only enforcement, as DDL for the database to run.

"Nobody can quietly edit" the board only if the database itself refuses UPDATE, DELETE and
TRUNCATE on result rows; a convention in Python would stop nobody with a SQL prompt
(docs/architecture.md, invariant 2). Migrations call `append_only(table)` for every table they create:

    for statement in append_only("runs"):
        op.execute(statement)

Both backends report the refusal as an integrity violation (SQLite's `RAISE(ABORT)` is a
constraint error; on PostgreSQL we raise SQLSTATE 23001 `restrict_violation`), so callers see
`sqlalchemy.exc.IntegrityError` on either, with the message `assay: <table> is append-only`.
"""

from __future__ import annotations

import re

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")

PG_FUNCTION = "assay_append_only"

_PG_FUNCTION_DDL = f"""
CREATE OR REPLACE FUNCTION {PG_FUNCTION}() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    RAISE EXCEPTION USING
        MESSAGE = 'assay: ' || TG_TABLE_NAME || ' is append-only',
        ERRCODE = 'restrict_violation';
END;
$body$
"""


def _checked(table_name: str) -> str:
    # The name is spliced into DDL, so it must be a plain identifier, never arbitrary text.
    if not _IDENTIFIER.match(table_name):
        raise ValueError(f"not a plain table name: {table_name!r}")
    return table_name


def _current_dialect() -> str:
    from alembic import op

    return str(op.get_bind().dialect.name)


def append_only(table_name: str, dialect: str | None = None) -> list[str]:
    """DDL statements that make `table_name` refuse UPDATE, DELETE (and TRUNCATE on PostgreSQL).

    `dialect` is "sqlite" or "postgresql"; when omitted it is read from the running Alembic
    migration's connection, so a migration can simply call `append_only("runs")`. On PostgreSQL
    the shared trigger function is (re)created first, which makes each call self-contained.
    """
    table = _checked(table_name)
    dialect = dialect or _current_dialect()
    if dialect == "sqlite":
        return [
            f"CREATE TRIGGER {table}_append_only_update BEFORE UPDATE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'assay: {table} is append-only'); END",
            f"CREATE TRIGGER {table}_append_only_delete BEFORE DELETE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'assay: {table} is append-only'); END",
        ]
    if dialect == "postgresql":
        return [
            _PG_FUNCTION_DDL,
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION {PG_FUNCTION}()",
            f"CREATE TRIGGER {table}_append_only_truncate BEFORE TRUNCATE ON {table} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {PG_FUNCTION}()",
        ]
    raise ValueError(f"append-only enforcement is not written for the {dialect!r} dialect")


def drop_append_only(table_name: str, dialect: str | None = None) -> list[str]:
    """The inverse of `append_only`, for downgrades (the shared PostgreSQL function stays)."""
    table = _checked(table_name)
    dialect = dialect or _current_dialect()
    if dialect == "sqlite":
        return [
            f"DROP TRIGGER IF EXISTS {table}_append_only_update",
            f"DROP TRIGGER IF EXISTS {table}_append_only_delete",
        ]
    if dialect == "postgresql":
        return [
            f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}",
            f"DROP TRIGGER IF EXISTS {table}_append_only_truncate ON {table}",
        ]
    raise ValueError(f"append-only enforcement is not written for the {dialect!r} dialect")
