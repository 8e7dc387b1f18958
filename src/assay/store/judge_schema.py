"""Tables of trait judging (issue 9): the rubric a release pins, the judge a submission is scored
with, and every pass of that judge over every run. All append-only.

- `release_rubrics`: the trait rubric a suite release pins (its document and hash), one row per
  release that has one; a release without a row is oracle-only and needs no judge.
- `submission_rubrics`: a rubric a submission brought of its own (`--rubric FILE`), replacing the
  release's for its runs (which are then never ranked).
- `batch_facilitators`: the facilitator a batch's campaign runs are worded by when it is not the
  release's (`--facilitator openai:MODEL`, bring your own key): spec and endpoint, never a key.
- `judge_configs`: the judge configuration pinned at the first scoring of a submission (spec, model,
  prompt version and hash, passes, the valid passes a run needs, temperature, rubric hash); every
  later pass of the submission is made with it. One row per submission, never replaced.
- `judge_passes`: one row per (run, pass index), valid (`verdicts`: the number the judge gave each
  trait in that pass, and `rationale`) or failed (`error`), with the judge's raw reply. A run's
  trait scores are derived from its valid passes (mean and variance); there is no score column to
  edit.
"""

from __future__ import annotations

import sqlalchemy as sa

from assay.store.schema import UTCDateTime, json_type, metadata

release_rubrics = sa.Table(
    "release_rubrics",
    metadata,
    sa.Column("release_id", sa.Integer, sa.ForeignKey("suite_releases.id"), primary_key=True),
    sa.Column("rubric_hash", sa.String(64), nullable=False),
    sa.Column("document", json_type(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

submission_rubrics = sa.Table(
    "submission_rubrics",
    metadata,
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
    sa.Column("rubric_hash", sa.String(64), nullable=False),
    sa.Column("document", json_type(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

batch_facilitators = sa.Table(
    "batch_facilitators",
    metadata,
    sa.Column("batch_id", sa.String(32), sa.ForeignKey("batches.id"), primary_key=True),
    sa.Column("spec", sa.String, nullable=False),
    sa.Column("base_url", sa.String, nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

judge_configs = sa.Table(
    "judge_configs",
    metadata,
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), primary_key=True),
    sa.Column("spec", sa.String, nullable=False),
    sa.Column("model", sa.String, nullable=False),
    sa.Column("prompt_version", sa.Integer, nullable=False),
    sa.Column("prompt_hash", sa.String(64), nullable=False),
    sa.Column("passes", sa.Integer, nullable=False),
    sa.Column("min_valid", sa.Integer, nullable=False),
    sa.Column("temperature", sa.Float, nullable=False),
    sa.Column("rubric_hash", sa.String(64), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

judge_passes = sa.Table(
    "judge_passes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
    sa.Column("run_id", sa.String(32), sa.ForeignKey("runs.run_id"), nullable=False),
    sa.Column("pass_index", sa.Integer, nullable=False),
    sa.Column("valid", sa.Boolean, nullable=False),
    sa.Column("verdicts", json_type(), nullable=True),
    sa.Column("rationale", json_type(), nullable=False),
    sa.Column("raw", sa.Text, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("error_kind", sa.String, nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.UniqueConstraint("run_id", "pass_index", name="uq_judge_passes_run_pass"),
    sa.Index("ix_judge_passes_submission", "submission_id"),
)

judge_endpoints = sa.Table(
    "judge_endpoints",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("submission_id", sa.String(32), sa.ForeignKey("submissions.id"), nullable=False),
    sa.Column("base_url", sa.String, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Index("ix_judge_endpoints_submission", "submission_id"),
)
"""The endpoint (base URL without credentials, never a key) a submission's model judge was asked
at, a row each time it changes; the latest is the one `assay score` asks again (0017)."""

JUDGE_TABLES: tuple[str, ...] = ("release_rubrics", "submission_rubrics", "batch_facilitators", "judge_configs",
                                  "judge_passes")
"""Tables 0005_judge_passes creates; all append-only."""
