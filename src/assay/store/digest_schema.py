"""The digests' tables, and the seeds' salts (issue 12, item 6; issue 23, item 2).

`submission_digests` holds, for every submission finalised since revision 0009, its *version 1*
digest: the SHA-256 of the canonical JSON of everything recorded for it (its plan with the seeds,
its runs with their transcripts, actions and final states, check outcomes, remote steps, sweeps,
win-condition outcomes, judge config and passes), in a fixed order (`assay.stats.digest`).

`digest_stamps` (revision 0016) holds a digest per (submission, digest version): version 2, over
what a public export holds (seed commitments, never seeds; no secret or private column), which
the board entry shows and anyone recomputes from a public export. Revision 0016 stamped version
2 on every submission finalised before it whose rows still add up to its version-1 stamp; since
then a submission is stamped with both versions in the transaction that finalises it, so a
finalised submission and its digests appear together or not at all.

`seed_salts` (revision 0016) holds each planned run's salt (`assay.stats.commitment`), written
in the transaction that stores the plan: a run's seed commitment is SHA-256 over its seed and this
salt. Secret like the seed: only a full export holds it.

All append-only (triggers): a digest, once stamped, is never replaced; a submission whose rows were
changed afterwards no longer adds up to it. A salt, once drawn, is the salt.
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

digest_stamps = sa.Table(
    "digest_stamps",
    metadata,
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
    sa.Column("digest_version", sa.Integer, primary_key=True),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint("digest_version >= 2", name="ck_digest_stamps_version"),
    sa.Index("ix_digest_stamps_created", "created_at"),  # 0020: the board's last change
)

seed_salts = sa.Table(
    "seed_salts",
    metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), primary_key=True),
    sa.Column("salt", sa.String(64), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

DIGEST_TABLES: tuple[str, ...] = ("submission_digests",)
"""Tables 0009 creates, every one append-only (see `triggers.py`)."""

COMMITMENT_TABLES: tuple[str, ...] = ("seed_salts", "digest_stamps")
"""Tables 0016 creates, every one append-only."""
