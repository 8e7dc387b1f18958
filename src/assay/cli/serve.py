"""`assay serve`, `assay key` and `assay play`: the service's commands (issue 10).

`assay.cli` calls `register(app)`. Every command takes `--db URL` like the rest of the CLI and
follows its error contract (one stderr line, exit 2). Keys are hashed under the server secret of
the store they are issued for (`assay.service.secret`): create them against the same `--db` (or
`ASSAY_SECRET`) the server runs with.
"""

from __future__ import annotations

from typing import Optional

import typer

from assay.service.actors import OPERATOR
from assay.cli.errors import StoreRetryOpt
from assay.cli.ui import DbOpt, JsonFlag, open_store_at, out, print_json

key_app = typer.Typer(no_args_is_help=True, help="API keys (submitters) and agent keys (agents).")


def _secret(db: str | None) -> bytes:
    from assay.service.secret import server_secret
    from assay.store.db import default_url

    return server_secret(db if db is not None else default_url())


@key_app.command("create")
def key_create(
    account: str = typer.Option(..., "--account", help="The account the key acts for."),
    kind: str = typer.Option(..., "--kind", metavar="api|agent",
                             help="api: a submitter's key; agent: a key an agent plays the account's runs with."),
    as_json: bool = typer.Option(False, "--json", help="Print the key's id, kind, account and prefix, and the key "
                                 "itself, as one JSON document."),
    db: Optional[str] = DbOpt,
) -> None:
    """Issue a key. It is printed once, as the last line, and never again (only its digest is stored)."""
    from assay.service import keys

    keys.check_kind(kind)
    store = open_store_at(db)
    view, key = keys.create(store, account, kind, _secret(db), actor=OPERATOR)
    if as_json:
        print_json({**view, "key": key})
        return
    out.print(f"{view['kind']} key {view['id']} for account {view['account']} ({view['prefix']}…); "
              "it is shown only now:", markup=False, highlight=False, soft_wrap=True)
    out.print(key, markup=False, highlight=False, soft_wrap=True)


@key_app.command("list")
def key_list(account: str = typer.Option(..., "--account", help="The account whose keys to list."),
             as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """An account's keys (id, kind, prefix, created, revoked); never a key or its digest."""
    from rich.table import Table

    from assay.service import keys

    rows = keys.list_keys(open_store_at(db), account, actor=OPERATOR)
    if as_json:
        print_json(rows)
        return
    table = Table(title=f"keys of {account}")
    for col in ("id", "kind", "prefix", "created", "revoked"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["id"], r["kind"], r["prefix"] + "…", r["created_at"][:19], (r["revoked_at"] or "")[:19])
    out.print(table)


@key_app.command("revoke")
def key_revoke(key_id: str = typer.Argument(..., metavar="ID", help="The key's id (from `assay key list`)."),
               as_json: bool = JsonFlag, db: Optional[str] = DbOpt) -> None:
    """Revoke a key: refused from the next request on (a revocation is recorded; it cannot be undone)."""
    from assay.service import keys

    view = keys.revoke(open_store_at(db), key_id, actor=OPERATOR)
    if as_json:
        print_json(view)
        return
    out.print(f"{view['kind']} key {view['id']} of account {view['account']} revoked", markup=False, highlight=False)


def _check_port_free(host: str, port: int) -> None:
    """A port another process holds is the user's to fix: one line, before uvicorn starts."""
    import socket

    from assay.errors import BadInput

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise BadInput(f"cannot resolve host: {exc.strerror}", f"--host {host}") from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise BadInput(f"cannot listen on {host}:{port}: {exc.strerror}", f"--port {port}") from None


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to listen on."),
    workers: int = typer.Option(1, "--workers", min=1, max=64, help="Server processes (uvicorn workers)."),
    db: Optional[str] = DbOpt,
    store_retry: Optional[float] = StoreRetryOpt,
    access_log: bool = typer.Option(False, "--access-log/--no-access-log",
                                    help="Log a line per request (off: at a few hundred requests a second the "
                                         "log took a seventh of the event loop; errors are logged either way)."),
) -> None:
    """Serve the JSON API and the board pages over HTTP (FastAPI on uvicorn); OpenAPI at /openapi.json.

    The store is opened (and migrated) and the server secret read or created before the first worker starts, so a bad --db is one line, not a crash per worker."""
    import os

    import uvicorn

    from assay.store.db import default_url, mask_url
    from assay.cli.ui import err
    from assay.web.app import Settings

    url = db if db is not None else default_url()
    open_store_at(url).close()
    os.environ["ASSAY_DB"] = url
    settings = Settings.from_env()  # the limits from ASSAY_BODY_LIMIT & co., checked; the secret made
    _check_port_free(host, port)
    os.environ.update(settings.to_env())  # what each worker's app_from_env reads
    err.print(f"assay serve: http://{host}:{port} · store {mask_url(url)} · {workers} worker(s)",
              markup=False, highlight=False, soft_wrap=True)
    http, loop = _transport()
    uvicorn.run("assay.web.app:app_from_env", factory=True, host=host, port=port, workers=workers,
                log_level="info", server_header=False, http=http, loop=loop, access_log=access_log)


def _transport() -> tuple[str, str]:
    """uvicorn's HTTP parser and event loop, named rather than left to "auto": httptools (C) parses a
    request in a fraction of pure-Python h11's time, and uvloop runs the loop under it (issue 26's
    read rate). Both are dependencies; uvloop has no Windows build, where asyncio's loop stays."""
    import httptools  # noqa: F401  (uvicorn imports it by name; imported here to fail early and clearly)

    try:
        import uvloop  # noqa: F401
    except ImportError:  # not installable on Windows: asyncio's own loop there
        return "httptools", "asyncio"
    return "httptools", "uvloop"


def register(app: typer.Typer) -> None:
    """Add the service's commands to `app`."""
    from assay.cli.admin import register as register_admin
    from assay.cli.play import register as register_play

    app.add_typer(key_app, name="key")
    app.command("serve")(serve)
    register_play(app)
    register_admin(app)
