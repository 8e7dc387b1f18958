"""The panel board's views as revision 0008 creates them (frozen; a later change gets a module of
its own, as the board's generations do).

Portable SQL, the same text on SQLite and PostgreSQL: no JSON functions, no `percentile_cont`
(SQLite has none). The median of a run's ratings in one category is written with window functions:
number the ratings in order (`ROW_NUMBER`) and count them (`COUNT(*) OVER`), keep the middle one
(odd count) or the two middle ones (even count), and average what is kept. With n ratings the
middle positions are `(n + 1) / 2` and `(n + 2) / 2` in integer division: the same position for an
odd n, the two middle ones for an even n, which is exactly `percentile_cont(0.5)`.

"Latest row wins" is `id = (SELECT MAX(id) ...)` (ids grow in insertion order and never tie), as in
the board's views. Only scorecards that count reach a number: the latest per (run, panelist), on a
run that is finalised (`scored`), by a panelist whose application is approved now.
"""

from __future__ import annotations

_CURRENT_DECISIONS = """
SELECT r.application_id AS application_id, r.decision AS decision, r.by_admin AS by_admin,
  r.reviewed_at AS reviewed_at
FROM panel_reviews r
WHERE r.id = (SELECT MAX(r2.id) FROM panel_reviews r2 WHERE r2.application_id = r.application_id)
"""

_COUNTED_CARDS = """
SELECT c.id AS card_id, c.run_id AS run_id, c.panelist_id AS panelist_id, pr.model_id AS model_id
FROM panel_scorecards c
JOIN panel_runs pr ON pr.id = c.run_id
JOIN panel_run_finalizations f ON f.run_id = c.run_id
JOIN panel_current_decisions d ON d.application_id = c.panelist_id AND d.decision = 'approved'
WHERE c.id = (
  SELECT MAX(c2.id) FROM panel_scorecards c2
  WHERE c2.run_id = c.run_id AND c2.panelist_id = c.panelist_id
)
"""

_RUN_MEDIANS = """
SELECT x.run_id AS run_id, x.model_id AS model_id, x.category AS category,
  MAX(x.n) AS n_panelists, AVG(x.rating) AS median_rating
FROM (
  SELECT k.run_id AS run_id, k.model_id AS model_id, g.category AS category, g.rating AS rating,
    ROW_NUMBER() OVER (PARTITION BY k.run_id, g.category ORDER BY g.rating) AS position,
    COUNT(*) OVER (PARTITION BY k.run_id, g.category) AS n
  FROM panel_counted_cards k
  JOIN panel_ratings g ON g.card_id = k.card_id
) x
WHERE x.position = (x.n + 1) / 2 OR x.position = (x.n + 2) / 2
GROUP BY x.run_id, x.model_id, x.category
"""

_MODEL_CATEGORIES = """
SELECT m.model_id AS model_id, m.category AS category, COUNT(*) AS n_runs, AVG(m.median_rating) AS mean_rating
FROM panel_run_medians m
GROUP BY m.model_id, m.category
"""

_BOARD = """
SELECT pm.id AS model_id, pm.slug AS slug, pm.name AS name, pm.vendor AS vendor,
  (SELECT COUNT(DISTINCT k.run_id) FROM panel_counted_cards k WHERE k.model_id = pm.id) AS n_runs,
  (SELECT COUNT(DISTINCT k.panelist_id) FROM panel_counted_cards k WHERE k.model_id = pm.id) AS n_panelists,
  (SELECT AVG(mc.mean_rating) FROM panel_model_categories mc WHERE mc.model_id = pm.id) AS overall_rating
FROM panel_models pm
WHERE EXISTS (SELECT 1 FROM panel_counted_cards k WHERE k.model_id = pm.id)
"""

VIEWS: tuple[tuple[str, str], ...] = (
    ("panel_current_decisions", _CURRENT_DECISIONS),
    ("panel_counted_cards", _COUNTED_CARDS),
    ("panel_run_medians", _RUN_MEDIANS),
    ("panel_model_categories", _MODEL_CATEGORIES),
    ("panel_board", _BOARD),
)
"""The panel views, in dependency order."""
