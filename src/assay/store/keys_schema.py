"""The keys' tables: API keys (submitters) and agent keys (agents), and their revocations, as Core.

A key is stored only as its HMAC-SHA256 digest under the server's secret, never as itself, so a
copy of the database does not hand out working keys. `prefix` is the key's first characters,
kept so a person can tell their keys apart (and so a presented key finds its row without scanning
every digest); it is not enough to use a key.

Both tables are append-only (built by migration 0006, with triggers): revoking a key is a new
`key_revocations` row, never an UPDATE, so the history of which key was valid when is kept.
"""

from __future__ import annotations

import sqlalchemy as sa

from assay.store.schema import UTCDateTime, metadata

KEY_KINDS = ("api", "agent")

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("account", sa.String, sa.ForeignKey("accounts.name"), nullable=False),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("prefix", sa.String(32), nullable=False),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.UniqueConstraint("digest", name="uq_api_keys_digest"),
    sa.Index("ix_api_keys_prefix", "prefix"),
    sa.Index("ix_api_keys_account", "account"),
    sa.CheckConstraint("kind IN ('api', 'agent')", name="ck_api_keys_kind"),
)

key_revocations = sa.Table(
    "key_revocations",
    metadata,
    sa.Column("key_id", sa.String(32), sa.ForeignKey("api_keys.id"), primary_key=True),
    sa.Column("revoked_at", UTCDateTime(), nullable=False),
)

KEYS_APPEND_ONLY_TABLES: tuple[str, ...] = ("api_keys", "key_revocations")
"""Tables 0006 makes append-only (see `triggers.py`)."""
