"""One implementation of every board figure, stored per entry (issue 24, item 2).

- The board views become generation `board_0018`: `board_run_facts` is one plain row per planned
  run of a submission (verdict, sweep and its participation floor, ranked-eligibility mark, check
  and win-condition counts, judge state), with no figure; `board_case_facts`,
  `board_submission_facts`, `board_entries` and `board_unlisted_entries`, which computed the
  figures a second time in SQL, are dropped. Every figure is computed in Python (`stats.board`).
- `entry_figures`: each finalised submission's figures and intervals, written when it completes and
  again only when what it depends on changes. Derived, not a result: the one table whose rows the
  service replaces, so it has no append-only trigger; on PostgreSQL it is under row-level security
  like every table, and the service role may also DELETE its rows (a replacement is a DELETE and an
  INSERT), through a policy of its own (`assay_service_replace`), and UPDATE its `listed` column
  (whether the public board lists the entry now, recomputed when a publication or handle event is
  appended), through `assay_service_relist`. It starts empty: the service fills
  it for the finalised submissions of a release the first time that board is read (or
  `assay board --recompute` does), from the rows.
Spelled out here (the table, and the grants as literal SQL), so this revision stays what it was.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_POSTGRESQL = (
    "GRANT DELETE ON entry_figures TO assay_service",
    "CREATE POLICY assay_service_replace ON entry_figures FOR DELETE TO assay_service USING (true)",
    "GRANT UPDATE (listed) ON entry_figures TO assay_service",
    "CREATE POLICY assay_service_relist ON entry_figures FOR UPDATE TO assay_service USING (true) WITH CHECK (true)",
)
_POSTGRESQL_DOWN = (
    "DROP POLICY IF EXISTS assay_service_relist ON entry_figures",
    "REVOKE UPDATE (listed) ON entry_figures FROM assay_service",
    "DROP POLICY IF EXISTS assay_service_replace ON entry_figures",
    "REVOKE DELETE ON entry_figures FROM assay_service",
)


# -- frozen SQL ---------------------------------------------------------------------------------
# What the live helpers (`assay.store.rls`, the view generations of `assay.store.views`) produced at
# this revision, copied here so that a later change to them cannot change what this migration does
# (tests/store/test_frozen_migrations.py).


def _secure(table: str) -> list[str]:
    """What `assay.store.rls.secure(table)` gave at this revision (PostgreSQL)."""
    return [
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY assay_service_read ON {table} FOR SELECT TO assay_service USING (true)",
        f"CREATE POLICY assay_service_append ON {table} FOR INSERT TO assay_service WITH CHECK (true)",
        f"CREATE POLICY assay_owner_all ON {table} FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true)",
    ]


def _unsecure(table: str) -> list[str]:
    """What `assay.store.rls.unsecure(table)` gave at this revision (PostgreSQL)."""
    return [
        f"DROP POLICY IF EXISTS assay_service_read ON {table}",
        f"DROP POLICY IF EXISTS assay_service_append ON {table}",
        f"DROP POLICY IF EXISTS assay_owner_all ON {table}",
        f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY",
        f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY",
    ]

#: views upgrade: `recreate(op.execute, board_0013.VIEWS, board_0018.VIEWS)` (`assay.store.views`)
_UP_VIEWS: tuple[str, ...] = (
    "DROP VIEW IF EXISTS board_facilitator_models",
    "DROP VIEW IF EXISTS board_unlisted_entries",
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
  s.id AS submission_id,
  s.release_id AS release_id,
  p.run_id AS run_id,
  p.slot AS slot,
  p.case_id AS case_id,
  p.trial AS rep,
  p.seed AS seed,
  r.status AS status,
  CASE WHEN r.run_id IS NULL THEN 0 ELSE 1 END AS has_run,
  (SELECT COUNT(*) FROM check_outcomes co WHERE co.run_id = p.run_id) AS n_checks,
  COALESCE(v.score, 0) AS score,
  COALESCE(v.safety_failures, 0) AS safety_failures,
  CASE WHEN v.passed THEN 1 ELSE 0 END AS passed,
  r.claimed_success AS claimed_success,
  CASE WHEN v.false_success THEN 1 ELSE 0 END AS false_success,
  CASE WHEN w.run_id IS NULL THEN 0 ELSE 1 END AS swept,
  w.player_messages AS player_messages,
  w.actions AS actions,
  w.min_player_messages AS min_player_messages,
  w.min_actions_per_turn AS min_actions_per_turn,
  w.facilitator_model AS facilitator_model,
  sr.ranked_eligible AS ranked_eligible,
  (SELECT COUNT(*) FROM win_condition_outcomes o WHERE o.run_id = p.run_id) AS win_total,
  (SELECT COUNT(*) FROM win_condition_outcomes o WHERE o.run_id = p.run_id AND o.met) AS win_met,
  CASE WHEN rr.release_id IS NULL AND sbr.submission_id IS NULL THEN 1
       WHEN jc.submission_id IS NOT NULL
            AND (SELECT COUNT(*) FROM judge_passes jp WHERE jp.run_id = p.run_id AND jp.valid) >= jc.min_valid
       THEN 1
       ELSE 0 END AS judged
FROM submissions s
JOIN planned_runs p ON p.batch_id = s.id
LEFT JOIN submission_runs sr ON sr.run_id = p.run_id
LEFT JOIN runs r ON r.run_id = p.run_id
LEFT JOIN run_verdicts v ON v.run_id = p.run_id
LEFT JOIN run_sweeps w ON w.run_id = p.run_id
LEFT JOIN release_rubrics rr ON rr.release_id = s.release_id
LEFT JOIN submission_rubrics sbr ON sbr.submission_id = s.id
LEFT JOIN judge_configs jc ON jc.submission_id = s.id""",
    """CREATE VIEW board_facilitator_models AS SELECT DISTINCT w.submission_id AS submission_id, w.facilitator_model AS facilitator_model
FROM run_sweeps w
WHERE w.facilitator_model IS NOT NULL""",
)

#: views downgrade: `recreate(op.execute, board_0018.VIEWS, board_0013.VIEWS)` (`assay.store.views`)
_DOWN_VIEWS: tuple[str, ...] = (
    "DROP VIEW IF EXISTS board_facilitator_models",
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
  CASE WHEN b.verdict_passed THEN 1 ELSE 0 END AS passed,
  b.claimed_success AS claimed_success,
  CASE WHEN b.verdict_false_success THEN 1 ELSE 0 END AS false_success,
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
    COALESCE(v.score, 0) AS score,
    COALESCE(v.safety_failures, 0) AS safety_failures,
    v.passed AS verdict_passed,
    v.false_success AS verdict_false_success,
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
  LEFT JOIN run_verdicts v ON v.run_id = p.run_id
  LEFT JOIN (
    SELECT co.run_id AS run_id,
           COUNT(*) AS n_checks
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
       ELSE 0 END AS measurement_era_is_current,
  CASE WHEN ul.submission_id IS NULL THEN 1 ELSE 0 END AS listed
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
LEFT JOIN unlisted_submissions ul ON ul.submission_id = s.id""",
    """CREATE VIEW board_entries AS SELECT
  f.submission_id AS submission_id, f.release_id AS release_id, f.account AS account, f.label AS label, f.play_model AS play_model, f.byok AS byok, f.baseline AS baseline, f.publish_requested AS publish_requested, f.created_at AS created_at, f.n_planned AS n_planned, f.n_recorded AS n_recorded, f.n_scored AS n_scored, f.n_gated AS n_gated, f.n_runs AS n_runs, f.n_passed AS n_passed, f.n_false_successes AS n_false_successes, f.n_cases AS n_cases, f.n_consistent_cases AS n_consistent_cases, f.win_total AS win_total, f.win_met AS win_met, f.pass_rate AS pass_rate, f.consistency AS consistency, f.false_success_rate AS false_success_rate, f.objective_met_rate AS objective_met_rate, f.status AS status, f.leaderboard_class AS leaderboard_class, f.model_provenance AS model_provenance, f.published AS published, f.public_handle AS public_handle, f.variance_note AS variance_note, f.finalised AS finalised, f.measurement_era AS measurement_era, f.measurement_era_is_current AS measurement_era_is_current,
  CASE WHEN (f.leaderboard_class = 'platform' AND f.status = 'complete') THEN RANK() OVER (
    PARTITION BY f.release_id, CASE WHEN (f.leaderboard_class = 'platform' AND f.status = 'complete') THEN 1 ELSE 0 END
    ORDER BY f.pass_rate DESC, f.false_success_rate ASC, f.consistency DESC
  ) END AS rank
FROM board_submission_facts f
WHERE f.published = 1 AND f.public_handle IS NOT NULL AND f.status = 'complete' AND f.listed = 1""",
    """CREATE VIEW board_unlisted_entries AS SELECT
  f.submission_id AS submission_id, f.release_id AS release_id, f.account AS account, f.label AS label, f.play_model AS play_model, f.byok AS byok, f.baseline AS baseline, f.publish_requested AS publish_requested, f.created_at AS created_at, f.n_planned AS n_planned, f.n_recorded AS n_recorded, f.n_scored AS n_scored, f.n_gated AS n_gated, f.n_runs AS n_runs, f.n_passed AS n_passed, f.n_false_successes AS n_false_successes, f.n_cases AS n_cases, f.n_consistent_cases AS n_consistent_cases, f.win_total AS win_total, f.win_met AS win_met, f.pass_rate AS pass_rate, f.consistency AS consistency, f.false_success_rate AS false_success_rate, f.objective_met_rate AS objective_met_rate, f.status AS status, f.leaderboard_class AS leaderboard_class, f.model_provenance AS model_provenance, f.published AS published, f.public_handle AS public_handle, f.variance_note AS variance_note, f.finalised AS finalised, f.measurement_era AS measurement_era, f.measurement_era_is_current AS measurement_era_is_current,
  CAST(NULL AS INTEGER) AS rank
FROM board_submission_facts f
WHERE f.published = 1 AND f.public_handle IS NOT NULL AND f.status = 'complete' AND f.listed = 0""",
    """CREATE VIEW board_facilitator_models AS SELECT DISTINCT w.submission_id AS submission_id, w.facilitator_model AS facilitator_model
FROM run_sweeps w
WHERE w.facilitator_model IS NOT NULL""",
)


def upgrade() -> None:
    op.create_table(
        "entry_figures",
        sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
        sa.Column("release_id", sa.Integer, sa.ForeignKey("suite_releases.id"), nullable=False),
        sa.Column("method", sa.String, nullable=False),
        sa.Column("complete", sa.Boolean, nullable=False),
        sa.Column("ranked", sa.Boolean, nullable=False),
        sa.Column("listed", sa.Boolean, nullable=False),
        sa.Column("order_key", sa.String, nullable=False),
        sa.Column("rank_low", sa.Float, nullable=True),
        sa.Column("rank_high", sa.Float, nullable=True),
        sa.Column("figures", sa.Text, nullable=False),
        sa.Column("shown", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    # one at a time, in this order (indexes given to create_table are a set: their order, and so the
    # schema snapshot's, would change from run to run)
    op.create_index("ix_entry_figures_order", "entry_figures", ["release_id", "listed", "order_key"])
    op.create_index("ix_entry_figures_rank", "entry_figures", ["release_id", "listed", "ranked", "rank_low"])
    for statement in _UP_VIEWS:
        op.execute(statement)
    if op.get_bind().dialect.name == "postgresql":
        for statement in (*_secure("entry_figures"), *_POSTGRESQL):
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in (*_POSTGRESQL_DOWN, *_unsecure("entry_figures")):
            op.execute(statement)
    for statement in _DOWN_VIEWS:
        op.execute(statement)
    op.drop_table("entry_figures")
