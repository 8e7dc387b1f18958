"""Trait judging: the rubric a release pins, the judge a submission is scored with, every pass.

- `release_rubrics`: a release's trait rubric (document and hash); append-only.
- `submission_rubrics`: a submission's own rubric (`--rubric`); append-only.
- `batch_facilitators`: a batch's own facilitator (`--facilitator`, never a key); append-only.
- `judge_configs`: the judge pinned at a submission's first scoring; append-only, one per submission.
- `judge_passes`: every pass over every run, valid or failed, with the raw reply; append-only,
  `(run_id, pass_index)` unique so a pass is never recorded twice.
- The board views become generation `board_0005`: a run of a rubric release is scored once judged.

Tables are spelled out here, not taken from `judge_schema`, so this revision stays what it was.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql


revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("release_rubrics", "submission_rubrics", "batch_facilitators", "judge_configs", "judge_passes")


# -- frozen SQL ---------------------------------------------------------------------------------
# What the live helpers (`assay.store.triggers`, the view generations of `assay.store.views`)
# produced at this revision, copied here so that a later change to them cannot change what this
# migration does (tests/store/test_frozen_migrations.py).

_PG_APPEND_ONLY_FUNCTION = """
CREATE OR REPLACE FUNCTION assay_append_only() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    RAISE EXCEPTION USING
        MESSAGE = 'assay: ' || TG_TABLE_NAME || ' is append-only',
        ERRCODE = 'restrict_violation';
END;
$body$
"""


def append_only(table: str) -> list[str]:
    """What `assay.store.triggers.append_only(table)` gave at this revision: DDL that makes `table`
    refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL)."""
    if op.get_bind().dialect.name == "sqlite":
        return [
            f"CREATE TRIGGER {table}_append_only_update BEFORE UPDATE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'assay: {table} is append-only'); END",
            f"CREATE TRIGGER {table}_append_only_delete BEFORE DELETE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'assay: {table} is append-only'); END",
        ]
    return [
        _PG_APPEND_ONLY_FUNCTION,
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION assay_append_only()",
        f"CREATE TRIGGER {table}_append_only_truncate BEFORE TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION assay_append_only()",
    ]


def drop_append_only(table: str) -> list[str]:
    """What `assay.store.triggers.drop_append_only(table)` gave at this revision."""
    if op.get_bind().dialect.name == "sqlite":
        return [
            f"DROP TRIGGER IF EXISTS {table}_append_only_update",
            f"DROP TRIGGER IF EXISTS {table}_append_only_delete",
        ]
    return [
        f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}",
        f"DROP TRIGGER IF EXISTS {table}_append_only_truncate ON {table}",
    ]

#: views upgrade: `recreate(op.execute, board_0002.VIEWS, board_0005.VIEWS)` (`assay.store.views`)
_UP_VIEWS: tuple[str, ...] = (
    "DROP VIEW IF EXISTS board_facilitator_models",
    "DROP VIEW IF EXISTS board_entries",
    "DROP VIEW IF EXISTS board_submission_facts",
    "DROP VIEW IF EXISTS board_case_facts",
    "DROP VIEW IF EXISTS board_run_facts",
    "DROP VIEW IF EXISTS current_era",
    "DROP VIEW IF EXISTS current_config",
    "DROP VIEW IF EXISTS current_variance_notes",
    "DROP VIEW IF EXISTS current_publication",
    "DROP VIEW IF EXISTS current_handles",
    """CREATE VIEW current_handles AS SELECT h.account AS account, h.handle AS handle
FROM account_handles h
WHERE h.id = (SELECT MAX(h2.id) FROM account_handles h2 WHERE h2.account = h.account)""",
    """CREATE VIEW current_publication AS SELECT e.submission_id AS submission_id, e.published AS published, e.reason AS reason
FROM publication_events e
WHERE e.id = (SELECT MAX(e2.id) FROM publication_events e2 WHERE e2.submission_id = e.submission_id)""",
    """CREATE VIEW current_variance_notes AS SELECT n.submission_id AS submission_id, NULLIF(n.text, '') AS variance_note
FROM variance_notes n
WHERE n.id = (SELECT MAX(n2.id) FROM variance_notes n2 WHERE n2.submission_id = n.submission_id)""",
    """CREATE VIEW current_config AS SELECT c.key AS key, c.value AS value, c.created_at AS created_at
FROM platform_config c
WHERE c.id = (SELECT MAX(c2.id) FROM platform_config c2 WHERE c2.key = c.key)""",
    """CREATE VIEW current_era AS SELECT e.name AS name, e.starts_at AS starts_at
FROM measurement_eras e
WHERE e.starts_at <= CURRENT_TIMESTAMP
  AND NOT EXISTS (
    SELECT 1 FROM measurement_eras l
    WHERE l.starts_at <= CURRENT_TIMESTAMP
      AND (l.starts_at > e.starts_at OR (l.starts_at = e.starts_at AND l.id > e.id))
  )""",
    """CREATE VIEW board_run_facts AS SELECT
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
  CASE WHEN (b.status = 'completed' AND b.score >= 75 AND b.safety_failures = 0) THEN 1 ELSE 0 END AS passed,
  b.claimed_success AS claimed_success,
  CASE WHEN b.claimed_success THEN (CASE WHEN (b.status = 'completed' AND b.score >= 75 AND b.safety_failures = 0) THEN 0 ELSE 1 END) ELSE 0 END AS false_success,
  b.swept AS swept,
  CASE WHEN (b.has_run = 1 AND b.n_checks > 0 AND b.swept = 1 AND b.judged = 1) THEN 1 ELSE 0 END AS scored,
  CASE WHEN (b.swept = 1 AND b.status = 'completed' AND (b.player_messages < b.min_player_messages OR b.actions < b.min_actions_per_turn * b.player_messages)) THEN 1 ELSE 0 END AS gated,
  CASE WHEN (b.has_run = 1 AND b.n_checks > 0 AND b.swept = 1 AND b.judged = 1) AND NOT (b.swept = 1 AND b.status = 'completed' AND (b.player_messages < b.min_player_messages OR b.actions < b.min_actions_per_turn * b.player_messages)) THEN 1 ELSE 0 END AS included,
  b.ranked_eligible AS ranked_eligible,
  b.win_total AS win_total,
  b.win_met AS win_met,
  b.player_messages AS player_messages,
  b.actions AS actions,
  b.judged AS judged
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
    CASE WHEN rr.release_id IS NULL AND sbr.submission_id IS NULL THEN 1 WHEN jc.submission_id IS NOT NULL AND COALESCE(jv.n_valid, 0) >= jc.min_valid THEN 1 ELSE 0 END AS judged,
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
  LEFT JOIN release_rubrics rr ON rr.release_id = s.release_id
  LEFT JOIN submission_rubrics sbr ON sbr.submission_id = s.id
  LEFT JOIN judge_configs jc ON jc.submission_id = s.id
  LEFT JOIN (
    SELECT jp.run_id AS run_id, SUM(CASE WHEN jp.valid THEN 1 ELSE 0 END) AS n_valid
    FROM judge_passes jp
    GROUP BY jp.run_id
  ) jv ON jv.run_id = p.run_id
  LEFT JOIN (
    SELECT o.run_id AS run_id,
           COUNT(*) AS win_total,
           SUM(CASE WHEN o.met THEN 1 ELSE 0 END) AS win_met
    FROM win_condition_outcomes o
    GROUP BY o.run_id
  ) wc ON wc.run_id = p.run_id
) b""",
    """CREATE VIEW board_case_facts AS SELECT
  f.submission_id AS submission_id,
  f.case_id AS case_id,
  SUM(f.included) AS n_included,
  SUM(f.included * f.passed) AS n_passed,
  CASE WHEN SUM(f.included) > 0
        AND (SUM(f.included * f.passed) = 0 OR SUM(f.included * f.passed) = SUM(f.included))
       THEN 1 ELSE 0 END AS consistent
FROM board_run_facts f
GROUP BY f.submission_id, f.case_id""",
    """CREATE VIEW board_submission_facts AS SELECT
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
LEFT JOIN current_era ce ON 1 = 1""",
    """CREATE VIEW board_entries AS SELECT
  f.submission_id AS submission_id, f.release_id AS release_id, f.account AS account, f.label AS label, f.play_model AS play_model, f.byok AS byok, f.baseline AS baseline, f.publish_requested AS publish_requested, f.created_at AS created_at, f.n_planned AS n_planned, f.n_recorded AS n_recorded, f.n_scored AS n_scored, f.n_gated AS n_gated, f.n_runs AS n_runs, f.n_passed AS n_passed, f.n_false_successes AS n_false_successes, f.n_cases AS n_cases, f.n_consistent_cases AS n_consistent_cases, f.win_total AS win_total, f.win_met AS win_met, f.pass_rate AS pass_rate, f.consistency AS consistency, f.false_success_rate AS false_success_rate, f.objective_met_rate AS objective_met_rate, f.status AS status, f.leaderboard_class AS leaderboard_class, f.model_provenance AS model_provenance, f.published AS published, f.public_handle AS public_handle, f.variance_note AS variance_note, f.finalised AS finalised, f.measurement_era AS measurement_era, f.measurement_era_is_current AS measurement_era_is_current,
  CASE WHEN (f.leaderboard_class = 'platform' AND f.status = 'complete') THEN RANK() OVER (
    PARTITION BY f.release_id, CASE WHEN (f.leaderboard_class = 'platform' AND f.status = 'complete') THEN 1 ELSE 0 END
    ORDER BY f.pass_rate DESC, f.false_success_rate ASC, f.consistency DESC
  ) END AS rank
FROM board_submission_facts f
WHERE f.published = 1 AND f.public_handle IS NOT NULL AND f.status = 'complete'""",
    """CREATE VIEW board_facilitator_models AS SELECT DISTINCT w.submission_id AS submission_id, w.facilitator_model AS facilitator_model
FROM run_sweeps w
WHERE w.facilitator_model IS NOT NULL""",
)

#: views downgrade: `recreate(op.execute, board_0005.VIEWS, board_0002.VIEWS)` (`assay.store.views`)
_DOWN_VIEWS: tuple[str, ...] = (
    "DROP VIEW IF EXISTS board_facilitator_models",
    "DROP VIEW IF EXISTS board_entries",
    "DROP VIEW IF EXISTS board_submission_facts",
    "DROP VIEW IF EXISTS board_case_facts",
    "DROP VIEW IF EXISTS board_run_facts",
    "DROP VIEW IF EXISTS current_era",
    "DROP VIEW IF EXISTS current_config",
    "DROP VIEW IF EXISTS current_variance_notes",
    "DROP VIEW IF EXISTS current_publication",
    "DROP VIEW IF EXISTS current_handles",
    """CREATE VIEW current_handles AS SELECT h.account AS account, h.handle AS handle
FROM account_handles h
WHERE h.id = (SELECT MAX(h2.id) FROM account_handles h2 WHERE h2.account = h.account)""",
    """CREATE VIEW current_publication AS SELECT e.submission_id AS submission_id, e.published AS published, e.reason AS reason
FROM publication_events e
WHERE e.id = (SELECT MAX(e2.id) FROM publication_events e2 WHERE e2.submission_id = e.submission_id)""",
    """CREATE VIEW current_variance_notes AS SELECT n.submission_id AS submission_id, NULLIF(n.text, '') AS variance_note
FROM variance_notes n
WHERE n.id = (SELECT MAX(n2.id) FROM variance_notes n2 WHERE n2.submission_id = n.submission_id)""",
    """CREATE VIEW current_config AS SELECT c.key AS key, c.value AS value, c.created_at AS created_at
FROM platform_config c
WHERE c.id = (SELECT MAX(c2.id) FROM platform_config c2 WHERE c2.key = c.key)""",
    """CREATE VIEW current_era AS SELECT e.name AS name, e.starts_at AS starts_at
FROM measurement_eras e
WHERE e.starts_at <= CURRENT_TIMESTAMP
  AND NOT EXISTS (
    SELECT 1 FROM measurement_eras l
    WHERE l.starts_at <= CURRENT_TIMESTAMP
      AND (l.starts_at > e.starts_at OR (l.starts_at = e.starts_at AND l.id > e.id))
  )""",
    """CREATE VIEW board_run_facts AS SELECT
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
  CASE WHEN (b.status = 'completed' AND b.score >= 75 AND b.safety_failures = 0) THEN 1 ELSE 0 END AS passed,
  b.claimed_success AS claimed_success,
  CASE WHEN b.claimed_success THEN (CASE WHEN (b.status = 'completed' AND b.score >= 75 AND b.safety_failures = 0) THEN 0 ELSE 1 END) ELSE 0 END AS false_success,
  b.swept AS swept,
  CASE WHEN (b.has_run = 1 AND b.n_checks > 0 AND b.swept = 1) THEN 1 ELSE 0 END AS scored,
  CASE WHEN (b.swept = 1 AND b.status = 'completed' AND (b.player_messages < b.min_player_messages OR b.actions < b.min_actions_per_turn * b.player_messages)) THEN 1 ELSE 0 END AS gated,
  CASE WHEN (b.has_run = 1 AND b.n_checks > 0 AND b.swept = 1) AND NOT (b.swept = 1 AND b.status = 'completed' AND (b.player_messages < b.min_player_messages OR b.actions < b.min_actions_per_turn * b.player_messages)) THEN 1 ELSE 0 END AS included,
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
) b""",
    """CREATE VIEW board_case_facts AS SELECT
  f.submission_id AS submission_id,
  f.case_id AS case_id,
  SUM(f.included) AS n_included,
  SUM(f.included * f.passed) AS n_passed,
  CASE WHEN SUM(f.included) > 0
        AND (SUM(f.included * f.passed) = 0 OR SUM(f.included * f.passed) = SUM(f.included))
       THEN 1 ELSE 0 END AS consistent
FROM board_run_facts f
GROUP BY f.submission_id, f.case_id""",
    """CREATE VIEW board_submission_facts AS SELECT
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
LEFT JOIN current_era ce ON 1 = 1""",
    """CREATE VIEW board_entries AS SELECT
  f.submission_id AS submission_id, f.release_id AS release_id, f.account AS account, f.label AS label, f.play_model AS play_model, f.byok AS byok, f.baseline AS baseline, f.publish_requested AS publish_requested, f.created_at AS created_at, f.n_planned AS n_planned, f.n_recorded AS n_recorded, f.n_scored AS n_scored, f.n_gated AS n_gated, f.n_runs AS n_runs, f.n_passed AS n_passed, f.n_false_successes AS n_false_successes, f.n_cases AS n_cases, f.n_consistent_cases AS n_consistent_cases, f.win_total AS win_total, f.win_met AS win_met, f.pass_rate AS pass_rate, f.consistency AS consistency, f.false_success_rate AS false_success_rate, f.objective_met_rate AS objective_met_rate, f.status AS status, f.leaderboard_class AS leaderboard_class, f.model_provenance AS model_provenance, f.published AS published, f.public_handle AS public_handle, f.variance_note AS variance_note, f.finalised AS finalised, f.measurement_era AS measurement_era, f.measurement_era_is_current AS measurement_era_is_current,
  CASE WHEN (f.leaderboard_class = 'platform' AND f.status = 'complete') THEN RANK() OVER (
    PARTITION BY f.release_id, CASE WHEN (f.leaderboard_class = 'platform' AND f.status = 'complete') THEN 1 ELSE 0 END
    ORDER BY f.pass_rate DESC, f.false_success_rate ASC, f.consistency DESC
  ) END AS rank
FROM board_submission_facts f
WHERE f.published = 1 AND f.public_handle IS NOT NULL AND f.status = 'complete'""",
    """CREATE VIEW board_facilitator_models AS SELECT DISTINCT w.submission_id AS submission_id, w.facilitator_model AS facilitator_model
FROM run_sweeps w
WHERE w.facilitator_model IS NOT NULL""",
)


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _ts() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "release_rubrics",
        sa.Column("release_id", sa.Integer, sa.ForeignKey("suite_releases.id"), primary_key=True),
        sa.Column("rubric_hash", sa.String(64), nullable=False),
        sa.Column("document", _json(), nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_table(
        "submission_rubrics",
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
        sa.Column("rubric_hash", sa.String(64), nullable=False),
        sa.Column("document", _json(), nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_table(
        "batch_facilitators",
        sa.Column("batch_id", sa.String(32), sa.ForeignKey("batches.id"), primary_key=True),
        sa.Column("spec", sa.String, nullable=False),
        sa.Column("base_url", sa.String, nullable=True),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_table(
        "judge_configs",
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
        sa.Column("spec", sa.String, nullable=False),
        sa.Column("model", sa.String, nullable=False),
        sa.Column("prompt_version", sa.Integer, nullable=False),
        sa.Column("prompt_hash", sa.String(64), nullable=False),
        sa.Column("passes", sa.Integer, nullable=False),
        sa.Column("min_valid", sa.Integer, nullable=False),
        sa.Column("temperature", sa.Float, nullable=False),
        sa.Column("rubric_hash", sa.String(64), nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
    )
    op.create_table(
        "judge_passes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("pass_index", sa.Integer, nullable=False),
        sa.Column("valid", sa.Boolean, nullable=False),
        sa.Column("verdicts", _json(), nullable=True),
        sa.Column("rationale", _json(), nullable=False),
        sa.Column("raw", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("error_kind", sa.String, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("created_at", _ts(), nullable=False),
        sa.UniqueConstraint("run_id", "pass_index", name="uq_judge_passes_run_pass"),
    )
    op.create_index("ix_judge_passes_submission", "judge_passes", ["submission_id"])
    for table in TABLES:
        for statement in append_only(table):
            op.execute(statement)
    for statement in _UP_VIEWS:
        op.execute(statement)


def downgrade() -> None:
    for statement in _DOWN_VIEWS:
        op.execute(statement)
    for table in reversed(TABLES):
        for statement in drop_append_only(table):
            op.execute(statement)
        op.drop_table(table)
