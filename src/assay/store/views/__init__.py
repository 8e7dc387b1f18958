"""The board's views, one module per generation of their text (docs/architecture.md: "the board's views get
a home"). A migration that changes a view imports the generation it creates, so every revision
stays what it was; `CURRENT` is the generation at the migrations' head, which the tests hold the
database to (`tests/store/test_views.py`).

- `board_0002`: the board as first built (pass rate, consistency, false success, objectives).
- `board_0005`: runs of a rubric release count as scored only once judged.
- `board_0011`: an unlisted entry (bring-your-own, published by id) is kept off `board_entries`.
- `board_0013`: a run's score, pass, safety failures and false success are read from its verdict
  row (`run_verdicts`, written by the scorer), never re-decided by the views.
- `board_0018`: no figure in SQL (issue 24): `board_run_facts` is one plain row of facts per planned
  run; the figure views (`board_case_facts`, `board_submission_facts`, `board_entries`,
  `board_unlisted_entries`) are dropped, every figure is computed in `stats.board` and kept in
  the derived table `entry_figures`. The generations before it are frozen history: the
  migrations that created them import them, nothing at head reads them.
- `panel_0008`: the human panel's board (per-run, per-category medians; the per-model rollup),
  beside the board's views, which it does not touch.
"""

from __future__ import annotations

from assay.store.views import board_0018, panel_0008

#: The board's views, then the panel's (independent of each other; each in dependency order).
CURRENT: tuple[tuple[str, str], ...] = board_0018.VIEWS + panel_0008.VIEWS


def recreate(execute, old: tuple[tuple[str, str], ...], new: tuple[tuple[str, str], ...]) -> None:  # noqa: ANN001
    """Replace the views `old` with `new` through `execute(sql)`: drop in reverse dependency order
    (PostgreSQL refuses to drop a view another one reads), create in order."""
    for name, _ in reversed(old):
        execute(f"DROP VIEW IF EXISTS {name}")
    for name, body in new:
        execute(f"CREATE VIEW {name} AS {body.strip()}")
