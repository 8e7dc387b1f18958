"""The board's views, one module per generation of their text (docs/architecture.md: "the board's views get
a home"). Each generation is the text a migration created (the migration carries its own copy of
the statements, so nothing changed here can change an old revision: `tests/store/test_frozen_migrations.py`);
`CURRENT` is the generation at the migrations' head, which the tests hold the database to
(`tests/store/test_views.py`). A migration that changes a view adds a generation here and inlines
its DROP and CREATE statements.

- `board_0002`: the board as first built (pass rate, consistency, false success, objectives).
- `board_0005`: runs of a rubric release count as scored only once judged.
- `board_0011`: an unlisted entry (bring-your-own, published by id) is kept off `board_entries`.
- `board_0013`: a run's score, pass, safety failures and false success are read from its verdict
  row (`run_verdicts`, written by the scorer), never re-decided by the views.
- `board_0018`: no figure in SQL (issue 24): `board_run_facts` is one plain row of facts per planned
  run; the figure views (`board_case_facts`, `board_submission_facts`, `board_entries`,
  `board_unlisted_entries`) are dropped, every figure is computed in `stats.board` and kept in
  the derived table `entry_figures`. The generations before it are history (their text, as
  the migrations that created them carry it); nothing at head reads them.
- `panel_0008`: the human panel's board (per-run, per-category medians; the per-model rollup),
  beside the board's views, which it does not touch.
"""

from __future__ import annotations

from assay.store.views import board_0018, panel_0008

#: The board's views, then the panel's (independent of each other; each in dependency order).
CURRENT: tuple[tuple[str, str], ...] = board_0018.VIEWS + panel_0008.VIEWS
