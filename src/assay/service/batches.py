"""Batches and submissions as the operator and their accounts find and list them (`assay batches`,
`assay submissions`, the web's batch routes). What a batch is and how it is played lives below:
its plan and agent rows and its execution in `service/execution.py`, its completion in
`service/completion.py`; creating one is the use case's (`service/runs.py`, `service/submissions.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from assay.errors import NotFound
from assay.service.actors import Actor, prefix_owner, require_owner, require_staff
from assay.service.board import submission_facts
from assay.store.repo import Store
from assay.store.rows import Batch, BatchSummary
from assay.store.runs_repo import RunsRepo
from assay.store.submissions_repo import SubmissionsRepo


def find(store: Store, ident: str, *, actor: Actor) -> Batch:
    """The batch or submission `ident` names (an id or a unique prefix); refused if none does,
    told what it is if `ident` names a run instead. A run batch is the operator's; a submission
    is also its account's."""
    owner = prefix_owner(actor)
    batch_id = RunsRepo(store).resolve_batch_id(ident, owner)
    if batch_id is None:
        if RunsRepo(store).resolve_run_id(ident, owner) is not None:
            raise NotFound("this is a run id, not a batch or submission; `assay debrief` shows a run", "batch",
                           value=ident)
        raise NotFound("no such batch or submission", "batch", value=ident)
    batch = RunsRepo(store).batch(batch_id)
    assert batch is not None
    if not actor.is_staff:
        require_owner(actor, owner_of(store, batch), "batch or submission", ident, "batch")
    return batch


def owner_of(store: Store, batch: Batch) -> str | None:
    """The account a batch belongs to: a submission's account; None for the operator's run batches."""
    if batch.kind != "submission":
        return None

    submission = SubmissionsRepo(store).submission(batch.id)
    return submission["account"] if submission is not None else None


@dataclass(frozen=True, slots=True)
class SubmissionSummary:
    """A submission as `list_submissions` lists it (the fields, in order, of the API's
    `SubmissionListed` and of `assay submissions --json`)."""

    id: str
    account: str
    suite: str
    version: str
    label: str
    status: str  # the board's `complete`/`incomplete` once finalised, else `pending`
    n_planned: int
    n_recorded: int
    n_scored: int
    created_at: str  # ISO 8601


def list_batches(store: Store, kind: str | None = None, *, actor: Actor) -> list[BatchSummary]:
    require_staff(actor, "list every batch", "batch")
    """Every stored batch, newest first: id, kind, suite, agent, when, status and counts."""
    return RunsRepo(store).batch_listing(kind)


def list_submissions(store: Store, account: str | None = None, suite: str | None = None, *,
                     actor: Actor) -> list[SubmissionSummary]:
    """Submissions, newest first: `status` is the board's (`complete`/`incomplete`) once the
    submission is finalised, `pending` before (runs still to play or sweep: `assay resume`)."""

    if not actor.is_staff:  # an account lists its own, whatever it asked for
        if actor.kind != "account" or account not in (None, actor.account):
            return []
        account = actor.account
    out = []
    for r in SubmissionsRepo(store).submission_listing(account, suite):
        f = submission_facts(store, r["submission_id"])
        assert f is not None  # listed: it exists
        out.append(SubmissionSummary(
            id=r["submission_id"], account=r["account"], suite=r["suite_key"], version=r["version"],
            label=r["label"], status=f["status"] if r["finalised"] else "pending",
            n_planned=f["n_planned"], n_recorded=f["n_recorded"], n_scored=f["n_scored"],
            created_at=r["created_at"].isoformat(),
        ))
    return out
