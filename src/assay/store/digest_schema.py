"""The digests' table: one SHA-256 per finalised submission, stamped once (issue 12, item 6).

`submission_digests` holds, for every submission finalised since revision 0009, the SHA-256 of the
canonical JSON of everything recorded for it (its plan, its runs with their transcripts, actions
and final states, check outcomes, remote steps, sweeps, win-condition outcomes, judge config and
passes), in a fixed order (`assay.stats.digest`). It is written in the transaction that finalises
the submission, so a finalised submission and its digest appear together or not at all; the board
entry shows it, and `assay verify` recomputes it from an export.

Append-only (triggers, built by migration `0009_digests`): a digest, once stamped, is never
replaced; a submission whose rows were changed afterwards no longer adds up to it.
"""

from __future__ import annotations

import sqlalchemy as sa

from assay.store.schema import UTCDateTime, metadata

submission_digests = sa.Table(
    "submission_digests",
    metadata,
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

DIGEST_TABLES: tuple[str, ...] = ("submission_digests",)
"""Tables 0009 creates, every one append-only (see `triggers.py`)."""
