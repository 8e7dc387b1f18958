"""The board views as revision 0005 creates them: 0002's, with trait judging in "scored".

A run of a release that pins a trait rubric (`release_rubrics`), or of a submission that brought
its own (`submission_rubrics`), is scored only once its judge has
made enough valid passes over it (`judge_configs.min_valid`, pinned at the submission's first
scoring); until then it is recorded but not scored, so its submission stays `incomplete` and off
the board (scoring lags run completion; no number from too little). A run of an oracle-only
release is judged trivially. `board_run_facts` gains the `judged` column.

Derived from `board_0002` by named substitutions, each checked to apply as often as expected, so the
difference between the two generations is this file and nothing else.
"""

from __future__ import annotations

from assay.store.views import board_0002
from assay.store.views.derive import derive

_JUDGED = (
    "CASE WHEN rr.release_id IS NULL AND sbr.submission_id IS NULL THEN 1"
    " WHEN jc.submission_id IS NOT NULL AND COALESCE(jv.n_valid, 0) >= jc.min_valid THEN 1"
    " ELSE 0 END"
)

_JUDGE_JOINS = """
  LEFT JOIN release_rubrics rr ON rr.release_id = s.release_id
  LEFT JOIN submission_rubrics sbr ON sbr.submission_id = s.id
  LEFT JOIN judge_configs jc ON jc.submission_id = s.id
  LEFT JOIN (
    SELECT jp.run_id AS run_id, SUM(CASE WHEN jp.valid THEN 1 ELSE 0 END) AS n_valid
    FROM judge_passes jp
    GROUP BY jp.run_id
  ) jv ON jv.run_id = p.run_id"""

#: (old, new, how many times old occurs in 0002's board_run_facts)
_SUBSTITUTIONS: tuple[tuple[str, str, int], ...] = (
    # scored = oracle-scored, swept, and judged (0002 spells its "scored" in `scored` and `included`)
    ("(b.has_run = 1 AND b.n_checks > 0 AND b.swept = 1)",
     "(b.has_run = 1 AND b.n_checks > 0 AND b.swept = 1 AND b.judged = 1)", 2),
    ("  b.actions AS actions\n", "  b.actions AS actions,\n  b.judged AS judged\n", 1),
    ("    sr.ranked_eligible AS ranked_eligible,\n",
     f"    sr.ranked_eligible AS ranked_eligible,\n    {_JUDGED} AS judged,\n", 1),
    ("  LEFT JOIN run_sweeps w ON w.run_id = p.run_id",
     "  LEFT JOIN run_sweeps w ON w.run_id = p.run_id" + _JUDGE_JOINS, 1),
)


VIEWS: tuple[tuple[str, str], ...] = derive("board_0005", board_0002.VIEWS, {"board_run_facts": _SUBSTITUTIONS})
