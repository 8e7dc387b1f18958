"""The board views as revision 0018 creates them: rows and per-run facts, no figure (issue 24).

Every figure, interval, class, status and rank is computed once, in Python (`assay.stats.board`),
from the per-run facts this generation's `board_run_facts` gives, and kept per entry in the derived
table `entry_figures`. What stays SQL is what is not a figure: the "current" row of each event
stream (handles, publication, variance notes, config, era), the facilitator models a submission's
sweeps recorded, and one row per planned run of a submission with what was recorded about it —
its verdict row (read, never re-decided), its sweep (the participation counts and the floor they
are held to), its ranked-eligibility mark, its win-condition and check-outcome counts, and its
judge state (`judged`: a run of a rubric release once its judge made enough valid passes).

Whether a run is scored, participation-gated or counted is decided in Python
(`stats.board.PlannedRunFacts`), not here. The per-run counts are correlated subqueries, so a read
filtered to one submission touches that submission's rows only (an index lookup per run), whatever
the size of the store.

Written out whole (not derived from `board_0013`): the figure views it drops are gone from the head.
"""

from __future__ import annotations

from assay.store.views import board_0002

_BOARD_RUN_FACTS = """
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
LEFT JOIN judge_configs jc ON jc.submission_id = s.id
"""

_KEPT = ("current_handles", "current_publication", "current_variance_notes", "current_config", "current_era")

#: The views at 0018, in dependency order: 0002's "current" views and facilitator models, as they were.
VIEWS: tuple[tuple[str, str], ...] = (
    *((name, body) for name, body in board_0002.VIEWS if name in _KEPT),
    ("board_run_facts", _BOARD_RUN_FACTS),
    *((name, body) for name, body in board_0002.VIEWS if name == "board_facilitator_models"),
)
