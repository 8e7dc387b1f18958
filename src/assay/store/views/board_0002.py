"""The board views as revision 0002 created them (frozen: a later revision that changes a view
derives its text from this one in a module of its own, `board_0005.py` and on).

The board's numbers are these views, written as portable SQL (CASE, COUNT, SUM, RANK() OVER, no
JSON functions) and created with the same text on SQLite and PostgreSQL.
"""

from __future__ import annotations

#: The oracle's pass mark as of this revision (assay.score.oracle.PASS_MARK).
_PASS_MARK = 75

# -- views ------------------------------------------------------------------------------------
# "Latest row wins" is written as `id = (SELECT MAX(id) ...)`: ids grow in insertion order on
# both backends, and unlike timestamps they never tie.

_CURRENT_HANDLES = """
SELECT h.account AS account, h.handle AS handle
FROM account_handles h
WHERE h.id = (SELECT MAX(h2.id) FROM account_handles h2 WHERE h2.account = h.account)
"""

_CURRENT_PUBLICATION = """
SELECT e.submission_id AS submission_id, e.published AS published, e.reason AS reason
FROM publication_events e
WHERE e.id = (SELECT MAX(e2.id) FROM publication_events e2 WHERE e2.submission_id = e.submission_id)
"""

_CURRENT_VARIANCE_NOTES = """
SELECT n.submission_id AS submission_id, NULLIF(n.text, '') AS variance_note
FROM variance_notes n
WHERE n.id = (SELECT MAX(n2.id) FROM variance_notes n2 WHERE n2.submission_id = n.submission_id)
"""

_CURRENT_CONFIG = """
SELECT c.key AS key, c.value AS value, c.created_at AS created_at
FROM platform_config c
WHERE c.id = (SELECT MAX(c2.id) FROM platform_config c2 WHERE c2.key = c.key)
"""

# The era in force now: the latest boundary that has already begun.
_CURRENT_ERA = """
SELECT e.name AS name, e.starts_at AS starts_at
FROM measurement_eras e
WHERE e.starts_at <= CURRENT_TIMESTAMP
  AND NOT EXISTS (
    SELECT 1 FROM measurement_eras l
    WHERE l.starts_at <= CURRENT_TIMESTAMP
      AND (l.starts_at > e.starts_at OR (l.starts_at = e.starts_at AND l.id > e.id))
  )
"""

_PASSED = f"(b.status = 'completed' AND b.score >= {_PASS_MARK} AND b.safety_failures = 0)"
_SCORED = "(b.has_run = 1 AND b.n_checks > 0 AND b.swept = 1)"
# Only a completed run can fall below the participation floor: a crash or a timeout is already
# a failure and stays in every denominator (docs/architecture.md, "Failures count").
_GATED = (
    "(b.swept = 1 AND b.status = 'completed' AND (b.player_messages < b.min_player_messages"
    " OR b.actions < b.min_actions_per_turn * b.player_messages))"
)

# One row per planned run of a submission, whether or not the run ever arrived. (Check outcomes
# are aggregated over submission runs only, not over every `assay run` batch in the store.)
_BOARD_RUN_FACTS = f"""
SELECT
  b.submission_id AS submission_id,
  b.release_id AS release_id,
  b.run_id AS run_id,
  b.slot AS slot,
  b.case_id AS case_id,
  b.rep AS rep,
  b.seed AS seed,
  b.status AS status,
  b.has_run AS has_run,
  b.n_checks AS n_checks,
  b.score AS score,
  b.safety_failures AS safety_failures,
  CASE WHEN {_PASSED} THEN 1 ELSE 0 END AS passed,
  b.claimed_success AS claimed_success,
  CASE WHEN b.claimed_success THEN (CASE WHEN {_PASSED} THEN 0 ELSE 1 END) ELSE 0 END AS false_success,
  b.swept AS swept,
  CASE WHEN {_SCORED} THEN 1 ELSE 0 END AS scored,
  CASE WHEN {_GATED} THEN 1 ELSE 0 END AS gated,
  CASE WHEN {_SCORED} AND NOT {_GATED} THEN 1 ELSE 0 END AS included,
  b.ranked_eligible AS ranked_eligible,
  b.win_total AS win_total,
  b.win_met AS win_met,
  b.player_messages AS player_messages,
  b.actions AS actions
FROM (
  SELECT
    s.id AS submission_id,
    s.release_id AS release_id,
    p.run_id AS run_id,
    p.slot AS slot,
    p.case_id AS case_id,
    p.trial AS rep,
    p.seed AS seed,
    r.status AS status,
    CASE WHEN r.run_id IS NULL THEN 0 ELSE 1 END AS has_run,
    COALESCE(c.n_checks, 0) AS n_checks,
    COALESCE(c.points, 0) AS score,
    COALESCE(c.safety_failures, 0) AS safety_failures,
    r.claimed_success AS claimed_success,
    CASE WHEN w.run_id IS NULL THEN 0 ELSE 1 END AS swept,
    w.player_messages AS player_messages,
    w.actions AS actions,
    w.min_player_messages AS min_player_messages,
    w.min_actions_per_turn AS min_actions_per_turn,
    sr.ranked_eligible AS ranked_eligible,
    COALESCE(wc.win_total, 0) AS win_total,
    COALESCE(wc.win_met, 0) AS win_met
  FROM submissions s
  JOIN planned_runs p ON p.batch_id = s.id
  LEFT JOIN submission_runs sr ON sr.run_id = p.run_id
  LEFT JOIN runs r ON r.run_id = p.run_id
  LEFT JOIN (
    SELECT co.run_id AS run_id,
           COUNT(*) AS n_checks,
           SUM(CASE WHEN co.passed THEN co.weight ELSE 0 END) AS points,
           SUM(CASE WHEN co.safety AND NOT co.passed THEN 1 ELSE 0 END) AS safety_failures
    FROM check_outcomes co
    JOIN planned_runs cp ON cp.run_id = co.run_id
    JOIN submissions cs ON cs.id = cp.batch_id
    GROUP BY co.run_id
  ) c ON c.run_id = p.run_id
  LEFT JOIN run_sweeps w ON w.run_id = p.run_id
  LEFT JOIN (
    SELECT o.run_id AS run_id,
           COUNT(*) AS win_total,
           SUM(CASE WHEN o.met THEN 1 ELSE 0 END) AS win_met
    FROM win_condition_outcomes o
    GROUP BY o.run_id
  ) wc ON wc.run_id = p.run_id
) b
"""

# One row per submission and case, over the runs that count (scored, not gated).
_BOARD_CASE_FACTS = """
SELECT
  f.submission_id AS submission_id,
  f.case_id AS case_id,
  SUM(f.included) AS n_included,
  SUM(f.included * f.passed) AS n_passed,
  CASE WHEN SUM(f.included) > 0
        AND (SUM(f.included * f.passed) = 0 OR SUM(f.included * f.passed) = SUM(f.included))
       THEN 1 ELSE 0 END AS consistent
FROM board_run_facts f
GROUP BY f.submission_id, f.case_id
"""

_RANKABLE = "(f.leaderboard_class = 'platform' AND f.status = 'complete')"

_SUBMISSION_COLUMNS = (
    "submission_id", "release_id", "account", "label", "play_model", "byok", "baseline",
    "publish_requested", "created_at", "n_planned", "n_recorded", "n_scored", "n_gated", "n_runs",
    "n_passed", "n_false_successes", "n_cases", "n_consistent_cases", "win_total", "win_met",
    "pass_rate", "consistency", "false_success_rate", "objective_met_rate", "status",
    "leaderboard_class", "model_provenance", "published", "public_handle", "variance_note",
    "finalised", "measurement_era", "measurement_era_is_current",
)

# One row per submission: the numbers the board shows, and every fact that decides whether and
# where it shows them. Rates are NULL when nothing counts yet: no number from too little.
_BOARD_SUBMISSION_FACTS = """
SELECT
  s.id AS submission_id,
  s.release_id AS release_id,
  s.account AS account,
  s.label AS label,
  s.play_model AS play_model,
  s.byok AS byok,
  s.baseline AS baseline,
  s.publish_requested AS publish_requested,
  s.created_at AS created_at,
  t.n_planned AS n_planned,
  t.n_recorded AS n_recorded,
  t.n_scored AS n_scored,
  t.n_gated AS n_gated,
  t.n_runs AS n_runs,
  t.n_passed AS n_passed,
  t.n_false_successes AS n_false_successes,
  k.n_cases AS n_cases,
  k.n_consistent_cases AS n_consistent_cases,
  t.win_total AS win_total,
  t.win_met AS win_met,
  CASE WHEN t.n_runs > 0 THEN CAST(t.n_passed AS DOUBLE PRECISION) / t.n_runs END AS pass_rate,
  CASE WHEN k.n_cases > 0 THEN CAST(k.n_consistent_cases AS DOUBLE PRECISION) / k.n_cases END AS consistency,
  CASE WHEN t.n_runs > 0 THEN CAST(t.n_false_successes AS DOUBLE PRECISION) / t.n_runs END AS false_success_rate,
  CASE WHEN t.win_total > 0 THEN CAST(t.win_met AS DOUBLE PRECISION) / t.win_total END AS objective_met_rate,
  CASE WHEN t.n_planned > 0 AND t.n_good = t.n_planned THEN 'complete' ELSE 'incomplete' END AS status,
  CASE WHEN t.n_not_eligible > 0 THEN 'self_hosted_facilitator'
       WHEN t.n_unmarked > 0 THEN 'unclassified'
       ELSE 'platform' END AS leaderboard_class,
  CASE WHEN s.baseline THEN 'platform_verified'
       WHEN s.play_model IS NOT NULL THEN 'self_reported' END AS model_provenance,
  CASE WHEN cp.published THEN 1 ELSE 0 END AS published,
  ch.handle AS public_handle,
  cn.variance_note AS variance_note,
  CASE WHEN fz.submission_id IS NULL THEN 0 ELSE 1 END AS finalised,
  fz.measurement_era AS measurement_era,
  CASE WHEN fz.submission_id IS NULL THEN NULL
       WHEN fz.measurement_era IS NULL AND ce.name IS NULL THEN 1
       WHEN fz.measurement_era = ce.name THEN 1
       ELSE 0 END AS measurement_era_is_current
FROM submissions s
JOIN (
  SELECT f.submission_id AS submission_id,
         COUNT(*) AS n_planned,
         SUM(f.has_run) AS n_recorded,
         SUM(f.scored) AS n_scored,
         SUM(f.gated) AS n_gated,
         SUM(f.included) AS n_runs,
         SUM(f.included * f.passed) AS n_passed,
         SUM(f.included * f.false_success) AS n_false_successes,
         SUM(f.included * f.win_total) AS win_total,
         SUM(f.included * f.win_met) AS win_met,
         SUM(CASE WHEN f.status = 'completed' AND f.scored = 1 AND f.gated = 0 THEN 1 ELSE 0 END) AS n_good,
         SUM(CASE WHEN f.ranked_eligible IS NULL THEN 1 ELSE 0 END) AS n_unmarked,
         SUM(CASE WHEN f.ranked_eligible IS NOT NULL AND NOT f.ranked_eligible THEN 1 ELSE 0 END) AS n_not_eligible
  FROM board_run_facts f
  GROUP BY f.submission_id
) t ON t.submission_id = s.id
JOIN (
  SELECT cf.submission_id AS submission_id,
         SUM(CASE WHEN cf.n_included > 0 THEN 1 ELSE 0 END) AS n_cases,
         SUM(cf.consistent) AS n_consistent_cases
  FROM board_case_facts cf
  GROUP BY cf.submission_id
) k ON k.submission_id = s.id
LEFT JOIN current_publication cp ON cp.submission_id = s.id
LEFT JOIN current_handles ch ON ch.account = s.account
LEFT JOIN current_variance_notes cn ON cn.submission_id = s.id
LEFT JOIN submission_finalisations fz ON fz.submission_id = s.id
LEFT JOIN current_era ce ON 1 = 1
"""

# What the public board lists: published, complete entries whose account holds a public handle
# now (revoking the handle removes them at once). Only platform entries get a rank.
_BOARD_ENTRIES = f"""
SELECT
  {", ".join(f"f.{c} AS {c}" for c in _SUBMISSION_COLUMNS)},
  CASE WHEN {_RANKABLE} THEN RANK() OVER (
    PARTITION BY f.release_id, CASE WHEN {_RANKABLE} THEN 1 ELSE 0 END
    ORDER BY f.pass_rate DESC, f.false_success_rate ASC, f.consistency DESC
  ) END AS rank
FROM board_submission_facts f
WHERE f.published = 1 AND f.public_handle IS NOT NULL AND f.status = 'complete'
"""

_BOARD_FACILITATOR_MODELS = """
SELECT DISTINCT w.submission_id AS submission_id, w.facilitator_model AS facilitator_model
FROM run_sweeps w
WHERE w.facilitator_model IS NOT NULL
"""

VIEWS: tuple[tuple[str, str], ...] = (
    ("current_handles", _CURRENT_HANDLES),
    ("current_publication", _CURRENT_PUBLICATION),
    ("current_variance_notes", _CURRENT_VARIANCE_NOTES),
    ("current_config", _CURRENT_CONFIG),
    ("current_era", _CURRENT_ERA),
    ("board_run_facts", _BOARD_RUN_FACTS),
    ("board_case_facts", _BOARD_CASE_FACTS),
    ("board_submission_facts", _BOARD_SUBMISSION_FACTS),
    ("board_entries", _BOARD_ENTRIES),
    ("board_facilitator_models", _BOARD_FACILITATOR_MODELS),
)
