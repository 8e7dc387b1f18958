"""Alembic environment for the Assay store.

Assay runs migrations in code (`assay.store.db.migrate`), handing over a connection that is
already inside a transaction, so the whole upgrade commits or rolls back as one. For developers
who run the `alembic` command by hand, a `sqlalchemy.url` in the config is honoured instead.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from assay.store.schema import metadata, name_postgresql_options


def _run(connection: sa.Connection) -> None:
    if connection.dialect.name == "postgresql":
        name_postgresql_options()  # the metadata's PostgreSQL-only options, named once a PostgreSQL store is at hand
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # SQLite can only change most table shapes by copy-and-rename.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection given and no sqlalchemy.url configured")
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("the Assay store migrates online only (its triggers are dialect-specific)")
run_migrations_online()
