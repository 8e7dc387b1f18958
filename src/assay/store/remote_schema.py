"""Remote play's table: every step a remote agent's run took, in order, as it was accepted.

A remote agent plays a leased run over HTTP, one assistant message per request (issue 10). The
server holds no run in memory between requests: `remote_steps` is the run's log, and the run at
any moment is a fresh fork of its world fed these rows in order (`run.drivers.Stepper`). So a
restarted server, or another worker process, continues a run exactly where it was, and the run
record written when it ends is a pure function of these rows. Append-only: a step, once taken,
is never changed, and a retried step is compared with the row, never written twice (the key is
`(run_id, step)`).

- `kind` `message`: the agent's answer (`reply` holds `{"message": <the JSON it sent>}`, made
  storable text); `failed`: the agent said it failed on its side (`reason`), the run is `crashed`;
  `expired`: the server ended the run, idle past its time (`timeout`).
- `elapsed`: the seconds charged to the agent for this step (from the previous answer, or the
  lease, to the request), as the engine's time budget counts them.
- `digest`: SHA-256 of what the step said, so a retry is recognised as the same step.

A campaign worded by a model facilitator speaks lines no replay can reproduce, so each is kept in
`remote_lines` the first time it is spoken (`seq` counts the run's facilitator lines from 0, the
opening), and every later replay of the run says the kept lines again before the model is asked
for the next one. The first line stored for a `seq` is the line: a racing replay that worded its
own finds the key taken and says the stored one. The finished run's transcript holds the same
lines, which is what the digest and every score read; these rows only carry an unfinished run.

The lease itself is a durable-batch claim (`run_claims`), held by a `claim_holders` row whose host
is `claims.REMOTE_HOST`: the remote agent, alive until its run is recorded.
"""

from __future__ import annotations

import sqlalchemy as sa

from assay.store.schema import UTCDateTime, json_type, metadata

STEP_KINDS = ("message", "failed", "expired")

remote_steps = sa.Table(
    "remote_steps",
    metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("reply", json_type(), nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("elapsed", sa.Float, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint("kind IN ('message', 'failed', 'expired')", name="ck_remote_steps_kind"),
    sa.CheckConstraint("step >= 1", name="ck_remote_steps_step"),
)

remote_lines = sa.Table(
    "remote_lines",
    metadata,
    sa.Column("run_id", sa.String(32), sa.ForeignKey("planned_runs.run_id"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("facilitator", sa.String, nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint("seq >= 0", name="ck_remote_lines_seq"),
)

REMOTE_APPEND_ONLY_TABLES: tuple[str, ...] = ("remote_steps", "remote_lines")
