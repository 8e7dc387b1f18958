"""PostgreSQL roles and row-level security, as DDL for migrations to run (issue 11, item 5).

The promise "a leaked public credential can read and write nothing" is kept by the database, not by
the app: every table has row-level security ENABLED and FORCED (so it binds the table's owner too,
unless the owner is a superuser), and no policy ever names the public-facing role, so it matches
no row. Two roles, created idempotently (roles belong to the whole cluster, so several databases,
or two migrations at once, may race to create them):

- `assay_public` (NOLOGIN): what a public-facing credential would be (a hosted PostgreSQL's "anon"
  role, a read-only reporting login, a leaked DSN). No grant, no policy: it reads and changes
  nothing, and even where a table privilege is granted to it, RLS leaves it no row.
- `assay_service` (NOLOGIN): the service's data role. It may SELECT and INSERT every table (the
  triggers refuse UPDATE and DELETE anyway) through explicit policies, and use the sequences.
  Migration 0015 made two exceptions (`SERVICE_UPDATES`, `SERVICE_READ_ONLY`): it may UPDATE the
  liveness columns of `claim_holders` (heartbeats, and a holder's end: every remote lease and every
  `assay run` ends one), and it only reads `alembic_version`, which nobody but the owner writes
  (TRUNCATE, which row-level security does not cover, is refused there by a trigger). Migration
  0018 made a third (`SERVICE_REPLACES`): it may DELETE rows of `entry_figures`, the derived table
  of every entry's figures, to replace them, and UPDATE their `listed` column.

Besides, every table gets a policy for the role that ran the migration (`CURRENT_USER` at that
moment: the tables' owner), so an owner that is not a superuser keeps working under FORCE.

How a deployment connects: run `assay` (migrations and server) as the owner, or — better — own
the tables with a migration role and serve as a LOGIN role that is a member of `assay_service`:

    CREATE ROLE assay_web LOGIN PASSWORD '…' IN ROLE assay_service;
    ASSAY_DB=postgresql+psycopg://assay_web:…@host/assay assay serve

(the schema must already be at head: `assay_service` may not create tables). A superuser bypasses
row-level security altogether, as PostgreSQL always lets it; the tests connect as one to build
databases, and prove the two roles separately.

A migration that creates a table after 0008 must secure it too: `for s in secure(table): op.execute(s)`
(`tests/web/panel/test_rls.py` holds every table of the database to it). Default privileges give
later tables and sequences the service role's grants; RLS cannot be defaulted, hence the helper.
"""

from __future__ import annotations

import re

PUBLIC_ROLE = "assay_public"
SERVICE_ROLE = "assay_service"
ROLES = (PUBLIC_ROLE, SERVICE_ROLE)

#: What the service role may UPDATE, by table (granted by column in migration 0015, with the policy
#: `assay_service_liveness`): a claim holder's heartbeat and end. Nothing else is ever updated.
SERVICE_UPDATES: dict[str, tuple[str, ...]] = {"claim_holders": ("heartbeat_at", "ended_at")}
#: Tables the service role reads and never writes (migration 0015).
SERVICE_READ_ONLY = ("alembic_version",)
#: Derived tables whose rows the service role replaces (DELETE, then INSERT), through the policy
#: `assay_service_replace`, and whose `listed` column it updates, through `assay_service_relist`
#: (migration 0018): every entry's stored figures. No result table is one.
SERVICE_REPLACES = ("entry_figures",)

#: Policy names `secure` creates on every table.
POLICIES = ("assay_service_read", "assay_service_append", "assay_owner_all")

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


def _checked(name: str) -> str:
    if not _IDENTIFIER.match(name):
        raise ValueError(f"not a plain identifier: {name!r}")
    return name


def create_roles() -> list[str]:
    """Create both roles unless they exist; a concurrent creator winning the race is fine."""
    return [
        f"""
DO $roles$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{_checked(role)}') THEN
    BEGIN
      CREATE ROLE {role} NOLOGIN;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;  -- another database's migration created it first
    END;
  END IF;
END
$roles$"""
        for role in ROLES
    ]


def grant_service() -> list[str]:
    """The service role's privileges on what exists now, and on what this owner creates later."""
    return [
        f"GRANT USAGE ON SCHEMA public TO {SERVICE_ROLE}",
        f"GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA public TO {SERVICE_ROLE}",
        f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {SERVICE_ROLE}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT ON TABLES TO {SERVICE_ROLE}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO {SERVICE_ROLE}",
    ]


def revoke_service() -> list[str]:
    """The inverse of `grant_service` (the roles themselves stay: other databases may use them)."""
    return [
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE USAGE, SELECT ON SEQUENCES FROM {SERVICE_ROLE}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE SELECT, INSERT ON TABLES FROM {SERVICE_ROLE}",
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {SERVICE_ROLE}",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {SERVICE_ROLE}",
        f"REVOKE USAGE ON SCHEMA public FROM {SERVICE_ROLE}",
    ]


def secure(table: str) -> list[str]:
    """Enable and force row-level security on `table`, with the service's and the owner's policies
    and none for the public role."""
    t = _checked(table)
    return [
        f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {t} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY assay_service_read ON {t} FOR SELECT TO {SERVICE_ROLE} USING (true)",
        f"CREATE POLICY assay_service_append ON {t} FOR INSERT TO {SERVICE_ROLE} WITH CHECK (true)",
        f"CREATE POLICY assay_owner_all ON {t} FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true)",
    ]


def unsecure(table: str) -> list[str]:
    """The inverse of `secure`, for downgrades."""
    t = _checked(table)
    return [
        *(f"DROP POLICY IF EXISTS {p} ON {t}" for p in POLICIES),
        f"ALTER TABLE {t} NO FORCE ROW LEVEL SECURITY",
        f"ALTER TABLE {t} DISABLE ROW LEVEL SECURITY",
    ]


#: The tables of the current schema (every one is secured), read while migrating.
TABLES_QUERY = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
