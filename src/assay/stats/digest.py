"""A submission's digest: SHA-256 over the canonical JSON of what is recorded for it.

The same pure function runs twice: when the submission is finalised (over the rows the store reads
inside that transaction, `service.exports.stamp`) and in `assay verify` (over the rows of an
export, with no database). So the rows are given as plain mappings of column → value, and every
choice that could make the two disagree is made here, once:

- **Which rows.** `PARTS`, in this order: the submission and its batch (with the agent, its own
  facilitator and rubric when it brought them), its planned runs, the runs themselves (status,
  claim, transcript, actions, final state and its hash), their check outcomes, the steps of a
  remote run, the completion sweeps, the win-condition outcomes, the pinned judge and every judge
  pass. A row belongs to a submission by its submission id (`owner == "submission"`) or by a run
  of the submission's plan (`owner == "run"`). Besides the rows, the document pins the release the
  submission was made on (key, version, release hash) and the era it was finalised under.
- **Which columns.** Each part names its columns, per digest version. A column a later revision
  adds to a table does not silently enter old digests: it needs a new digest version.

  *Version 1* (`PARTS_V1`, stamped from revision 0009 on, in `submission_digests`) hashes every
  column of every part, secrets included: the runs' seeds and the batch's base seed, the agent's
  spec and load options, the facilitator's endpoint, the account's name, the runs' final states.
  Only a full export, which holds those, can recompute it.

  *Version 2* (`PARTS_V2`, the `DIGEST_VERSION` new finalisations are stamped with and boards
  show, in `digest_stamps`) hashes exactly what a public export holds (issue 23): each planned
  run's *seed commitment* (`stats.commitment`) instead of its seed, and none of the secret or
  private columns above (no `base_seed`, `agent_spec`, `load_spec`, `options`, facilitator
  `base_url`, `account`, `final_state`; the final state's hash stays). So anyone with a public
  export recomputes it; a full export recomputes it too, from the seeds and their salts
  (`with_commitments`). The account is not pinned by version 2 (its public handle may change);
  version 1 pins it, for the operator.
- **Which order.** Within a part, rows sorted by the table's primary key (code-point order for
  text, the order of SQLite's BINARY and PostgreSQL's "C" collation alike).
- **Which bytes.** `plain` turns a stored value into JSON: a timestamp becomes its ISO 8601 text
  in UTC, a number whose integer value lies beyond ±(2^53 − 1) its decimal text (I-JSON, RFC 7493:
  JSON numbers beyond that lose digits in most parsers; RFC 8785 refuses such integers); then RFC
  8785 canonical JSON (`assay.canonical`). An export
  writes each row as exactly these bytes, one row per line, so a row read back from an export is
  byte for byte the row that was hashed.

The document is `{"digest_version", "finalisation": {"measurement_era"}, "release": {...},
"rows": {table: [row, ...]}}`; its canonical bytes are assembled from each row's canonical bytes
(which is what RFC 8785 gives for the whole, and much faster than re-encoding it whole when a
transcript is long), and a property test holds the two equal.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal

from assay.canonical import canonical_bytes, sha256_hex
from assay.stats.commitment import seed_commitment

#: The digest version new finalisations are stamped with and boards show (see the module docstring).
DIGEST_VERSION = 2
#: Every digest version this module can recompute.
DIGEST_VERSIONS = (1, 2)
MAX_SAFE_INT = 2**53 - 1

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Part:
    """One table's share of a submission's digest."""

    table: str
    #: how a row belongs to a submission: its `column` holds the submission id, or a run id of its plan
    owner: Literal["submission", "run"]
    column: str
    #: the table's primary key: the order of the part's rows
    key: tuple[str, ...]
    #: the columns hashed
    columns: tuple[str, ...]

    def sort_key(self, row: Row) -> tuple[Any, ...]:
        return tuple(plain(row[c]) for c in self.key)


PARTS_V1: tuple[Part, ...] = (
    Part("submissions", "submission", "id", ("id",),
         ("id", "account", "release_id", "label", "play_model", "byok", "baseline", "publish_requested",
          "created_at")),
    Part("batches", "submission", "id", ("id",),
         ("id", "kind", "suite_key", "suite_version", "agent_spec", "agent_label", "config_signature",
          "harness_version", "trials", "base_seed", "created_at")),
    Part("batch_agents", "submission", "batch_id", ("batch_id",),
         ("batch_id", "load_spec", "options", "turn_limit", "time_limit", "created_at")),
    Part("batch_facilitators", "submission", "batch_id", ("batch_id",),
         ("batch_id", "spec", "base_url", "created_at")),
    Part("submission_rubrics", "submission", "submission_id", ("submission_id",),
         ("submission_id", "rubric_hash", "document", "created_at")),
    Part("planned_runs", "submission", "batch_id", ("batch_id", "slot"),
         ("batch_id", "slot", "run_id", "case_id", "scenario_hash", "trial", "seed")),
    Part("submission_runs", "submission", "submission_id", ("run_id",),
         ("run_id", "submission_id", "ranked_eligible")),
    Part("runs", "run", "run_id", ("run_id",),
         ("run_id", "status", "reason", "claimed_success", "claim_summary", "turns", "final_state_hash",
          "final_state", "transcript", "actions", "duration_ms", "created_at", "schema_version")),
    Part("check_outcomes", "run", "run_id", ("run_id", "check_id"),
         ("run_id", "check_id", "ordinal", "weight", "safety", "passed")),
    Part("remote_steps", "run", "run_id", ("run_id", "step"),
         ("run_id", "step", "kind", "reply", "reason", "digest", "elapsed", "created_at")),
    Part("run_sweeps", "submission", "submission_id", ("run_id",),
         ("run_id", "submission_id", "player_messages", "actions", "min_player_messages", "min_actions_per_turn",
          "facilitator_model", "created_at")),
    Part("win_condition_outcomes", "run", "run_id", ("run_id", "condition_id"),
         ("run_id", "condition_id", "ordinal", "met")),
    Part("judge_configs", "submission", "submission_id", ("submission_id",),
         ("submission_id", "spec", "model", "prompt_version", "prompt_hash", "passes", "min_valid", "temperature",
          "rubric_hash", "created_at")),
    Part("judge_passes", "submission", "submission_id", ("id",),
         ("id", "submission_id", "run_id", "pass_index", "valid", "verdicts", "rationale", "raw", "error",
          "error_kind", "attempts", "created_at")),
)
"""What a submission's digest covers, in order (digest version 1: every column, secrets included).

`run_verdicts` is deliberately not a part: a verdict row is derived from the run's status, claim
and check outcomes, which are digested here, so it adds nothing a forger could change unseen (and
`assay verify` holds every verdict row to the oracle's rule over those rows); adding it would change
the digest of every submission already stamped, which are compared with the live board's."""

PARTS = PARTS_V1
"""The parts' tables and owners (the same in every version); their columns are version 1's."""


def _v2(part: Part, drop: tuple[str, ...] = (), add: tuple[str, ...] = ()) -> Part:
    kept = tuple(c for c in part.columns if c not in drop) + add
    assert set(drop) <= set(part.columns) and part.column in kept
    return Part(part.table, part.owner, part.column, part.key, kept)


#: Per table, the version-1 columns version 2 leaves out: secrets, private names, and what would
#: show a world beyond what the agent saw.
V2_DROPPED: dict[str, tuple[str, ...]] = {
    "submissions": ("account",),
    "batches": ("agent_spec", "base_seed"),
    "batch_agents": ("load_spec", "options"),
    "batch_facilitators": ("base_url",),
    "planned_runs": ("seed",),
    "runs": ("final_state",),
}
#: The column a planned run holds in version 2 (and in a public export) instead of its seed.
COMMITMENT = "seed_commitment"

PARTS_V2: tuple[Part, ...] = tuple(
    _v2(p, V2_DROPPED.get(p.table, ()), (COMMITMENT,) if p.table == "planned_runs" else ()) for p in PARTS_V1)
"""What a submission's digest covers in version 2: what a public export holds (see the module
docstring), in the same order as version 1."""

PARTS_BY_VERSION: dict[int, tuple[Part, ...]] = {1: PARTS_V1, 2: PARTS_V2}

#: The release fields the digest pins.
RELEASE_FIELDS = ("suite_key", "version", "release_hash")


def plain(value: Any) -> Any:
    """`value` as JSON that RFC 8785 can encode and that reads back as itself: timestamps as ISO
    8601 text in UTC, numbers beyond ±(2^53 − 1) as decimal text, tuples as lists. Idempotent, so
    a row read back from an export is plain already."""
    t = type(value)
    if value is None or t is str or t is bool:
        return value
    if t is int:
        return value if -MAX_SAFE_INT <= value <= MAX_SAFE_INT else str(value)
    if t is float:
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no JSON form")
        # RFC 8785 writes such a float with all its digits, which reads back as a big integer:
        # give it the big integer's form, so that it reads back as itself
        return str(int(value)) if MAX_SAFE_INT < abs(value) < 1e21 else value
    if isinstance(value, datetime):
        moment = value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
        return moment.isoformat()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, int):  # an int subclass (IntEnum): its number
        return plain(int(value))
    raise TypeError(f"{t.__name__} has no JSON form")


def row_bytes(row: Row) -> bytes:
    """The canonical bytes of one row (an export's line, without its newline)."""
    return canonical_bytes(plain(dict(row)))


def _object(members: Iterable[tuple[str, bytes]]) -> bytes:
    """A JSON object from (ASCII key, canonical value bytes), keys in canonical (sorted) order."""
    ordered = sorted(members)
    return b"{" + b",".join(json.dumps(k).encode("ascii") + b":" + v for k, v in ordered) + b"}"


def with_commitments(planned: Iterable[Row], salts: Mapping[str, str]) -> list[dict[str, Any]]:
    """Planned runs as version 2 and a public export hold them: each with its `seed_commitment`
    (its seed under its run's salt, `salts[run_id]`). A run with no salt is a KeyError. A seed
    may be given as `plain` writes one beyond ±(2^53 − 1): its decimal text."""
    return [{**r, COMMITMENT: seed_commitment(_integer(r["seed"]), salts[r["run_id"]])} for r in planned]


def _integer(value: Any) -> Any:
    return int(value) if type(value) is str and value.lstrip("-").isdigit() else value


def document_bytes(release: Row, measurement_era: str | None, rows: Mapping[str, Iterable[Row]], *,
                   version: int) -> bytes:
    """The canonical JSON of a submission's digest document (see the module docstring).

    `release` holds at least `RELEASE_FIELDS`; `rows` maps a part's table to the submission's rows
    of it, in any order (a table not given has none), each row holding at least the version's
    columns (for version 2, planned runs with their `seed_commitment`: `with_commitments`)."""
    tables = []
    for part in PARTS_BY_VERSION[version]:
        given = sorted(rows.get(part.table, ()), key=part.sort_key)
        encoded = b"[" + b",".join(row_bytes({c: r[c] for c in part.columns}) for r in given) + b"]"
        tables.append((part.table, encoded))
    return _object([
        ("digest_version", canonical_bytes(version)),
        ("finalisation", canonical_bytes({"measurement_era": measurement_era})),
        ("release", canonical_bytes(plain({f: release[f] for f in RELEASE_FIELDS}))),
        ("rows", _object(tables)),
    ])


def submission_digest(release: Row, measurement_era: str | None, rows: Mapping[str, Iterable[Row]], *,
                      version: int) -> str:
    """The submission's digest under `version`: SHA-256 (hex) of `document_bytes`."""
    return sha256_hex(document_bytes(release, measurement_era, rows, version=version))


def group_by_submission(tables: Mapping[str, Sequence[Row]]) -> dict[str, dict[str, list[Row]]]:
    """{submission id: {table: its rows}} over whole tables (an export's), by each part's owner
    rule: a run's rows go to the submission whose plan holds the run. Rows of `assay run` batches
    (no submission) belong to none."""
    submissions = {str(r["id"]) for r in tables.get("submissions", ())}
    run_owner = {str(r["run_id"]): str(r["batch_id"]) for r in tables.get("planned_runs", ())
                 if str(r["batch_id"]) in submissions}
    grouped: dict[str, dict[str, list[Row]]] = {s: {} for s in submissions}
    for part in PARTS:
        for row in tables.get(part.table, ()):
            ident = str(row[part.column])
            owner = ident if part.owner == "submission" else run_owner.get(ident)
            if owner in grouped:
                grouped[owner].setdefault(part.table, []).append(row)
    return grouped
