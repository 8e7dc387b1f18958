"""What the CLI says when a batch or a scoring could not do its work (issue 23, item 4): one line
per reason on stderr and exit 1, never a quiet exit 0.

- `no_agent_reached(store, batch_id)`: every run of the batch that was played is recorded as
  `error` because its agent's endpoint could not be reached (`agents.protocol.unreachable_reason`):
  the batch measured nothing, and says so.
- `judging_lines(summary)`: the reasons a scoring left runs without a judge score
  (`service.scoring.score`'s `failures`), each with the command that retries it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from assay.agents.protocol import unreachable_reason
from assay.cli.ui import err

if TYPE_CHECKING:
    from assay.service.scoring import ScoringSummary

#: The exit code of a batch that reached no agent, and of a scoring that could not finish.
FAILED = 1


def no_agent_reached(store: Any, batch_id: str) -> str | None:
    """One line when no recorded run of the batch could reach its agent, else None."""
    from assay.store.runs_repo import RunsRepo

    rows = [(r.status, r.reason) for r in RunsRepo(store).runs_for_batch(batch_id, bodies=False) if r.status is not None]
    return _unreached(rows, batch_id)


def no_agent_reached_in(results: dict[str, Any]) -> str | None:
    """`no_agent_reached` read from the batch's results JSON (which holds every trial's status
    and reason already: `assay run` has it at hand, and reads no run again)."""
    rows = [(t["status"], t["reason"]) for c in results["cases"] for t in c["trials"] if t["recorded"]]
    return _unreached(rows, results["batch_id"])


def _unreached(rows: Sequence[tuple[str, str | None]], batch_id: str) -> str | None:
    if not rows or not all(status == "error" and unreachable_reason(reason) for status, reason in rows):
        return None
    reasons = sorted({str(reason) for _, reason in rows})
    return (f"no run could reach its agent ({'; '.join(reasons)}): {len(rows)} run(s) of {batch_id} are recorded "
            "as error, which `assay resume` cannot replay; check the endpoint and run again")


def judging_lines(summary: ScoringSummary | None) -> list[str]:
    """One line per reason judging could not finish, naming how to retry (none when it finished)."""
    if not summary:
        return []
    from assay.service.scoring import SPENT

    return [f"{reason.removesuffix(SPENT)}; {n} run(s) not judged" + (
        SPENT if reason.endswith(SPENT) else f"; `assay score {summary.submission_id}` to retry")
        for reason, n in summary.failures.items()]


def say_all(lines: list[str]) -> None:
    for line in lines:
        err.print(f"assay: error: {line}", markup=False, highlight=False, soft_wrap=True)
