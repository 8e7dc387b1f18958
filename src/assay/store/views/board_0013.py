"""The board views as revision 0013 creates them: 0011's, with the verdicts read, never re-decided.

The pass rule lives in one place, the scorer (`assay.score.oracle`), which stamps every recorded
run with a verdict row (`run_verdicts`: score, passed, safety failures, false success, and the
scorer's version). `board_run_facts` reads `score`, `safety_failures`, `passed` and
`false_success` from that row (LEFT JOIN: a planned run with no run has no verdict, and stays a
failure in the denominator) instead of evaluating 0002's `_PASSED` over the check outcomes; the
check outcomes are still counted (`n_checks`: a run is oracle-scored once it has some). The
statistics above the runs (`board_case_facts`, `board_submission_facts`) only sum these columns,
and are unchanged.

Derived from `board_0011` by named substitutions, each checked to apply as often as expected, so the
difference between the two generations is this file and nothing else.
"""

from __future__ import annotations

from assay.store.views import board_0002, board_0011
from assay.store.views.derive import derive

_PASSED = board_0002._PASSED

#: (old, new, how many times old occurs in 0011's board_run_facts)
_SUBSTITUTIONS: tuple[tuple[str, str, int], ...] = (
    (f"  CASE WHEN {_PASSED} THEN 1 ELSE 0 END AS passed,\n",
     "  CASE WHEN b.verdict_passed THEN 1 ELSE 0 END AS passed,\n", 1),
    (f"  CASE WHEN b.claimed_success THEN (CASE WHEN {_PASSED} THEN 0 ELSE 1 END) ELSE 0 END AS false_success,\n",
     "  CASE WHEN b.verdict_false_success THEN 1 ELSE 0 END AS false_success,\n", 1),
    ("    COALESCE(c.points, 0) AS score,\n    COALESCE(c.safety_failures, 0) AS safety_failures,\n",
     "    COALESCE(v.score, 0) AS score,\n    COALESCE(v.safety_failures, 0) AS safety_failures,\n"
     "    v.passed AS verdict_passed,\n    v.false_success AS verdict_false_success,\n", 1),
    # the check outcomes are only counted now: the verdict is the scorer's
    ("           COUNT(*) AS n_checks,\n"
     "           SUM(CASE WHEN co.passed THEN co.weight ELSE 0 END) AS points,\n"
     "           SUM(CASE WHEN co.safety AND NOT co.passed THEN 1 ELSE 0 END) AS safety_failures\n",
     "           COUNT(*) AS n_checks\n", 1),
    ("  LEFT JOIN runs r ON r.run_id = p.run_id\n",
     "  LEFT JOIN runs r ON r.run_id = p.run_id\n  LEFT JOIN run_verdicts v ON v.run_id = p.run_id\n", 1),
)


def _views() -> tuple[tuple[str, str], ...]:
    views = derive("board_0013", board_0011.VIEWS, {"board_run_facts": _SUBSTITUTIONS})
    facts = dict(views)["board_run_facts"]
    if "b.score >=" in facts or "co.weight" in facts:
        raise AssertionError("board_0013: board_run_facts still evaluates the pass rule")
    return views


VIEWS: tuple[tuple[str, str], ...] = _views()
