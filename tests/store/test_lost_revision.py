"""A store whose `alembic_version` was emptied or dropped is refused, never migrated over (issue 23).

Migrating from "no revision" over tables that exist would fail half-way (or worse, succeed in
part); opening refuses instead, in one line, and changes nothing. On both backends.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from assay.errors import BadInput
from assay.store import open_store


def _shape(url: str) -> tuple[list[str], int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            tables = sorted(sa.inspect(conn).get_table_names())
            n = conn.execute(sa.text("SELECT COUNT(*) FROM suite_releases")).scalar_one()
        return tables, n
    finally:
        engine.dispose()


@pytest.mark.parametrize("lose", ["DELETE FROM alembic_version", "DROP TABLE alembic_version"])
def test_a_store_without_its_revision_is_refused_in_one_line_and_left_as_it_was(
        db_url: str, templates: Any, lose: str) -> None:
    templates.copy_into(db_url, "bootstrapped")
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:  # as the owner (a superuser on PostgreSQL: no trigger, no policy binds)
        conn.execute(sa.text(lose))
    engine.dispose()
    before = _shape(db_url)
    for _ in range(2):  # refused again: the refusal changed nothing
        with pytest.raises(BadInput) as refused:
            open_store(db_url)
        message = str(refused.value)
        assert "the store's schema revision is missing" in message and "\n" not in message
        assert _shape(db_url) == before


def test_an_empty_database_still_migrates(db_url: str) -> None:
    open_store(db_url).close()
    open_store(db_url).close()
