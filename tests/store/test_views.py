"""The database holds exactly the views of `assay.store.views.CURRENT`, created from that text, and
each generation of the views differs from the one before only where its module says."""

from __future__ import annotations

import sqlalchemy as sa

from assay.store import Store
from assay.store.views import CURRENT, board_0002, board_0005


def test_the_migrated_database_holds_the_current_views(store: Store) -> None:
    names = {name for name, _ in CURRENT}
    assert set(sa.inspect(store.engine).get_view_names()) == names
    if store.dialect == "sqlite":
        with store.engine.connect() as conn:
            stored = dict(conn.execute(sa.text("SELECT name, sql FROM sqlite_master WHERE type = 'view'")).all())
        assert stored == {name: f"CREATE VIEW {name} AS {body.strip()}" for name, body in CURRENT}


def test_generation_0005_changes_only_the_run_facts() -> None:
    before, after = dict(board_0002.VIEWS), dict(board_0005.VIEWS)
    assert list(before) == list(after)
    changed = sorted(name for name in before if before[name] != after[name])
    assert changed == ["board_run_facts"]
    assert "b.judged = 1" in after["board_run_facts"] and "judge_passes" in after["board_run_facts"]


def test_run_facts_say_whether_a_run_is_judged(store: Store) -> None:
    with store.engine.connect() as conn:
        columns = conn.execute(sa.text("SELECT * FROM board_run_facts WHERE 1 = 0")).keys()
    assert "judged" in list(columns)
