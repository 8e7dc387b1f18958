"""Opening a store: where it lives, how the engine is set up, and bringing its schema to head.

Opening happens on every CLI command, so it must be cheap: when the database already sits at
`HEAD_REVISION`, `open_store` only reads `alembic_version` and returns, without importing Alembic
(which, with Mako and Pygments behind it, costs more than the rest of opening). Anything that
stops the database from opening (a malformed URL, a driver that is not installed, a server that
is not there, a schema newer than this code) is the user's to fix, so it surfaces as one
`BadInput` line that names the URL with its password masked (docs/architecture.md, Errors).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from assay.errors import BadInput, Invalid
from assay.store.faults import Retry, seconds_from_env
from assay.store.jsonvalue import dumps
from assay.store.handle import Store
from assay.store.schema import name_postgresql_options

MIGRATIONS_DIR: Path = Path(__file__).resolve().parent / "migrations"

#: The revision the migrations end at, known without asking Alembic, so that opening a store that
#: is up to date never imports it. A test holds it equal to Alembic's own head; were it ever stale,
#: opening would only take the slow path, which asks Alembic and finds nothing to do.
HEAD_REVISION = "0021"

#: Key of the PostgreSQL advisory lock that serialises concurrent first-time migrations.
_MIGRATION_LOCK = int.from_bytes(hashlib.sha256(b"assay:migrate").digest()[:8], "big", signed=True)

#: SQLite waits this long for another writer instead of failing at once with "database is locked".
SQLITE_BUSY_TIMEOUT_MS = 10_000

#: A PostgreSQL server that does not answer should be reported, not waited on forever.
PG_CONNECT_TIMEOUT_S = 10

#: Connections a process keeps open between uses, and how many more it opens in a burst (closed
#: again when returned): more than `assay serve`'s two lanes' threads (`web.edge.Lanes`, 8 + 16)
#: and its workers, so a busy server reuses its connections. With SQLAlchemy's default (5 kept,
#: 10 more) 32 remote agents made the server open and close a connection for most requests: on
#: PostgreSQL a new server process each, a fifth of its threads' working samples (issue 26).
POOL_SIZE = 32
POOL_OVERFLOW = 8


def default_url() -> str:
    """`ASSAY_DB` if set, else a SQLite file in the user's data directory (created if missing)."""
    env = os.environ.get("ASSAY_DB")
    if env:
        return env
    import platformdirs

    data_dir = Path(platformdirs.user_data_dir("assay"))
    data_dir.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{data_dir / 'assay.db'}"


def mask_url(url: str) -> str:
    """The URL as it may be shown to a person: any password replaced by `***`."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparseable URL still must not leak its password
        return re.sub(r"(//[^/@:]*:)[^@/]*@", r"\1***@", url)


def _password(url: str) -> str | None:
    try:
        return sa.make_url(url).password
    except Exception:  # noqa: BLE001
        match = re.search(r"//[^/@:]*:([^@/]*)@", url)
        return match.group(1) if match else None


def _one_line(exc: BaseException, secret: str | None) -> str:
    """The first line of what went wrong, with the password scrubbed should a driver echo it."""
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip().splitlines()
    line = text[0].strip() if text else type(inner).__name__
    if secret:
        line = line.replace(secret, "***")
    return line


def _normalise(url: sa.URL) -> sa.URL:
    """Bare `postgresql://` (and Heroku-style `postgres://`) mean psycopg 3, the driver we ship."""
    if url.drivername in ("postgresql", "postgres"):
        return url.set(drivername="postgresql+psycopg")
    return url


def create_store_engine(url: str) -> sa.Engine:
    """An engine configured the way the store relies on, without connecting yet.

    SQLite: foreign keys on (off by default!), WAL so readers never block the writer, a busy
    timeout, and real transactions: the stdlib driver's own BEGIN handling skips DDL and never
    locks early, so we emit BEGIN ourselves, and BEGIN IMMEDIATE for writes (see `Store`), which
    takes the write lock up front instead of failing half-way through a read-then-write.
    """
    parsed = _normalise(sa.make_url(url))
    if parsed.get_backend_name() == "postgresql":
        name_postgresql_options()
        # a pooled connection is checked before use, so one a database restart or
        # `pg_terminate_backend` killed is replaced instead of failing the statement sent over it
        # (a SQLite connection is a file handle: nothing kills it)
        engine = sa.create_engine(
            parsed, json_serializer=dumps, json_deserializer=json.loads, pool_pre_ping=True,
            pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW,
            connect_args={} if "connect_timeout" in parsed.query else {"connect_timeout": PG_CONNECT_TIMEOUT_S})
    else:
        engine = sa.create_engine(parsed, json_serializer=dumps, json_deserializer=json.loads)
        if isinstance(engine.pool, sa.pool.QueuePool):  # a file (in memory: one connection per thread)
            engine.dispose()
            engine = sa.create_engine(parsed, json_serializer=dumps, json_deserializer=json.loads,
                                      pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW)
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine)
    return engine


def _configure_sqlite(engine: sa.Engine) -> None:
    # Many rows go in as multi-row INSERT statements rather than one statement per row: the stdlib
    # driver lets go of the interpreter lock around every statement it steps, and each time it
    # must wait for it again while the batch's other threads hold it, so a block of runs written
    # row by row waited on the lock thousands of times (the run writer fell behind the players).
    engine.dialect.use_insertmanyvalues_wo_returning = True

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves, below
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA journal_mode = WAL")
        finally:
            cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        immediate = conn.get_execution_options().get(Store.WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _alembic_config(connection: sa.Connection | None = None) -> Any:
    from alembic.config import Config

    config = Config()
    # configparser interpolation: a literal % in the path must be doubled.
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revisions() -> set[str]:
    """The revisions this code's migrations end at, as Alembic reads them from the scripts."""
    from alembic.script import ScriptDirectory

    return set(ScriptDirectory(str(MIGRATIONS_DIR)).get_heads())


def current_revisions(connection: sa.Connection) -> set[str]:
    """The revisions the database says it is at (empty for a fresh database)."""
    from alembic.runtime.migration import MigrationContext

    return set(MigrationContext.configure(connection).get_current_heads())


def _at_head(connection: sa.Connection) -> bool:
    """Whether the database sits at `HEAD_REVISION`, read with one query and no Alembic. Any doubt
    (no `alembic_version` table yet, several heads) answers no, and Alembic decides."""
    try:
        rows = connection.exec_driver_sql("SELECT version_num FROM alembic_version").all()
    except (sa.exc.OperationalError, sa.exc.ProgrammingError):
        connection.rollback()
        return False
    return [tuple(r) for r in rows] == [(HEAD_REVISION,)]


def migrate(engine: sa.Engine, *, snapshot: bool = True) -> bool:
    """Bring the schema to head in one transaction; return whether anything had to run.

    The fast path reads `alembic_version` only. An empty SQLite database is built from the schema
    snapshot (`store/snapshot.py`) when it is at head (`snapshot=False`: by the migrations, as
    the snapshot itself is made). A database at a revision these migrations do not know was
    upgraded by a newer assay: we refuse rather than guess.
    """
    with engine.connect() as conn:
        if _at_head(conn):
            return False
    if snapshot and engine.dialect.name == "sqlite" and _from_snapshot(engine):
        return True  # it was empty (checked in the write transaction that built it)
    with engine.connect() as conn:
        current = current_revisions(conn)
        _refuse_lost_revision(conn, current)
    from alembic import command
    from alembic.script import ScriptDirectory

    heads = head_revisions()
    if current == heads:
        return False
    script = ScriptDirectory(str(MIGRATIONS_DIR))
    unknown = sorted(rev for rev in current if _is_unknown(script, rev))
    if unknown:
        raise BadInput(
            f"database {engine.url.render_as_string(hide_password=True)} is at schema revision "
            f"{', '.join(unknown)}, newer than this assay knows; upgrade assay"
        )
    with engine.connect().execution_options(**{Store.WRITE_OPTION: True}) as conn:
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
            current = current_revisions(conn)
            if current == heads:  # another process migrated while we waited
                return False
            _refuse_lost_revision(conn, current)
            command.upgrade(_alembic_config(conn), "head")
    return True


def _from_snapshot(engine: sa.Engine) -> bool:
    from assay.store import snapshot

    with engine.connect().execution_options(**{Store.WRITE_OPTION: True}) as conn, conn.begin():
        return snapshot.build(conn, HEAD_REVISION)


def _refuse_lost_revision(connection: sa.Connection, current: set[str]) -> None:
    """A database with the store's tables but no revision (an emptied or dropped `alembic_version`)
    would be migrated from nothing over tables that exist: refused, so it is never half-migrated."""
    if current:
        return
    from assay.store.schema import metadata

    if set(sa.inspect(connection).get_table_names()) & set(metadata.tables):
        raise BadInput(
            f"cannot open database {connection.engine.url.render_as_string(hide_password=True)}: the store's "
            "schema revision is missing (alembic_version is empty but the store's tables exist); restore "
            "alembic_version from a backup, or stamp the revision the tables are at, then open it again")


def _is_unknown(script: Any, rev: str) -> bool:
    try:
        return script.get_revision(rev) is None
    except Exception:  # noqa: BLE001 - alembic raises for revisions it has never heard of
        return True


#: The database kinds a store can live in.
SUPPORTED = ("sqlite", "postgresql")


def _refuse_unusable(url: str, shown: str) -> None:
    """A URL that names no lasting store, or a kind of database the store is not written for.

    An in-memory SQLite database vanishes with the process (and with every connection of the
    pool), so anything stored there is silently lost: refused, as is an empty URL."""
    if not url.strip():
        raise Invalid("an empty URL names no store (leave the option out for the default one)", "db")
    if "://" not in url:  # a bare path: say the URL that names it
        raise Invalid(f"cannot open database {shown}: a store is named by a URL, e.g. "
                      f"sqlite:///{Path(url).expanduser().resolve()} for this file, or postgresql://USER@HOST/DB", "db")
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        return  # reported as unparseable below, with the driver's own words
    backend = parsed.get_backend_name()
    if backend == "postgres":
        backend = "postgresql"
    if backend not in SUPPORTED:
        raise Invalid(f"cannot open database {shown}: '{backend}' is not supported "
                      f"(supported: {', '.join(SUPPORTED)})", "db")
    if backend == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise Invalid(f"cannot open database {shown}: an in-memory SQLite database is lost when the "
                      "command ends; name a file (sqlite:///path/to/assay.db)", "db")


def open_store(url: str | None = None) -> Store:
    """Open (creating and migrating if needed) the store at `url`, default `default_url()`."""
    url = default_url() if url is None else url
    retry = Retry(seconds_from_env())  # a bad ASSAY_STORE_RETRY is refused before anything opens
    shown = mask_url(url)
    secret = _password(url)
    _refuse_unusable(url, shown)
    try:
        engine = create_store_engine(url)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError, ValueError) as exc:
        raise Invalid(f"cannot open database {shown}: {_one_line(exc, secret)}", "db") from None
    try:
        migrate(engine)
    except BadInput:
        engine.dispose()
        raise
    except (sa.exc.DatabaseError, sa.exc.InterfaceError) as exc:
        # connection refused, unknown database, bad password, a file that is not SQLite, ...
        engine.dispose()
        raise Invalid(f"cannot open database {shown}: {_one_line(exc, secret)}", "db") from None
    except BaseException:
        engine.dispose()
        raise
    return Store(engine, shown, retry)

