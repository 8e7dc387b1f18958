"""`/mcp`: remote play over MCP's Streamable HTTP, authenticated by an agent key (issue 28).

Each MCP session leases the next pending run of the key's account's remote submissions as it
opens (`initialize`; refused with a JSON-RPC error when none is pending), and plays it one tool
call a step through the step API's own service (`service.mcp_play.RemotePlay` over
`service.remote`): the same lease, the same recorded steps, turn and time limits and expiry
(a session that stays past its run's time ends it as a `timeout`, by the app's sweeper), the
same release. The session's instructions, and the resource `assay://briefing`, are the run's
briefing; its tools are the world's tools plus `finish`.

A session holds its lease while its client holds a connection to it (a request in flight, or its
GET stream open), and for `LEASE_SECONDS` after (the durable-batch claims' lease): a client that
went away (killed, its network gone) loses it then, and the run is handed back
(`remote.release`), pending again where it was, nothing recorded or charged. A client that ends
its session (HTTP DELETE) hands its unfinished run back at once. After a run's end the session
answers tool calls with an error saying so: the next run is the next session's.

Sessions live in the memory of the process that opened them (the SDK's stateful transport):
serve `/mcp` from one worker, or route a session's requests to one worker. Only the handshake
era's protocol versions are spoken (a 2026-07-28 request has no session to hold a run), so a
client that asks for that era is answered `-32022` naming the versions it may use, and the SDK's
client falls back to the handshake by itself.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from assay.errors import BadInput
from assay.service.mcp_play import Play, RemotePlay, mcp_server
from assay.store.claims import LEASE_SECONDS

log = logging.getLogger("assay.web")

#: Where the endpoint is.
PATH = "/mcp"
#: Seconds between sweeps for sessions whose client went away.
REAP_SECONDS = 5.0
_SLOT = "assay.mcp"


@dataclass
class _Session:
    slot: dict[str, Any]  # {"actor", "play"}: the play is set as the session's `initialize` is answered
    account: str
    in_flight: int
    quiet_since: float

    @property
    def play(self) -> Play | None:
        return self.slot.get("play")


class McpSessions:
    """The MCP sessions this process serves, each with its play and its liveness. `clock` is
    injected by tests (a session's lease is counted on it)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, lease_seconds: float = LEASE_SECONDS) -> None:
        self.clock, self.lease_seconds = clock, lease_seconds
        self._sessions: dict[str, _Session] = {}

    def open(self, session_id: str, slot: dict[str, Any], account: str) -> None:
        self._sessions[session_id] = _Session(slot, account, 1, self.clock())

    def get(self, session_id: str) -> _Session | None:
        return self._sessions.get(session_id)

    def enter(self, session: _Session) -> None:
        session.in_flight += 1

    def leave(self, session: _Session) -> None:
        session.in_flight = max(0, session.in_flight - 1)
        if session.in_flight == 0:
            session.quiet_since = self.clock()

    def end(self, session_id: str) -> Play | None:
        """Forget the session; its play, to be closed (its unfinished run handed back)."""
        found = self._sessions.pop(session_id, None)
        return None if found is None else found.play

    def lapsed(self, now: float | None = None) -> list[Play]:
        """Forget every session whose client has held no connection for `lease_seconds`; their plays."""
        now = self.clock() if now is None else now
        gone = [sid for sid, s in self._sessions.items()
                if s.in_flight == 0 and now - s.quiet_since > self.lease_seconds]
        plays = [self._sessions.pop(sid).play for sid in gone]
        return [p for p in plays if p is not None]

    def reap(self, now: float | None = None) -> list[str]:
        """Hand back the runs of the sessions whose lease lapsed; their run ids."""
        released = []
        for play in self.lapsed(now):
            try:
                play.close()
                released.append(play.run_id)
            except Exception as exc:  # noqa: BLE001 - the next sweep; the run's time limit ends it anyway
                log.warning("run %s: could not hand the run of a lapsed MCP session back: %s: %s", play.run_id,
                            type(exc).__name__, exc)
        return released


async def _send_json(send: Any, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    raw = json.dumps(body).encode("utf-8")
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    head += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": raw})


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == name), None)


class McpEndpoint:
    """The ASGI endpoint at `/mcp`: the key checked, the session's play found, liveness counted,
    around the SDK's Streamable HTTP session manager."""

    def __init__(self, app: Any, sessions: McpSessions | None = None) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.app, self.sessions = app, sessions or McpSessions()
        self.server = mcp_server(self._play_of, on_initialize=self._lease)
        self._manager_class = StreamableHTTPSessionManager
        self.manager = self._new_manager()

    def _new_manager(self) -> Any:
        return self._manager_class(app=self.server, session_idle_timeout=None)

    @staticmethod
    def _play_of(ctx: Any) -> Play:
        slot = ctx.request.scope.get(_SLOT) if ctx.request is not None else None
        play = (slot or {}).get("play")
        if play is None:
            from mcp.shared.exceptions import MCPError

            raise MCPError(code=-32600, message="this session holds no run")
        return play

    async def _lease(self, ctx: Any) -> None:
        import anyio
        from mcp.shared.exceptions import MCPError

        slot = ctx.request.scope.get(_SLOT) if ctx.request is not None else None
        if slot is None or slot.get("play") is not None:
            raise MCPError(code=-32600, message="a session is opened once")
        store = self.app.state.store
        play = await anyio.to_thread.run_sync(RemotePlay.lease, store, slot["actor"])
        if play is None:
            raise MCPError(code=-32600, message="no run is pending for this agent key's remote submissions")
        slot["play"] = play

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The session manager, and the sweep for lapsed sessions, while the app runs."""
        import anyio

        if getattr(self.manager, "_has_started", False):  # an app started again (a test's second `with`)
            self.manager = self._new_manager()
        async with self.manager.run(), anyio.create_task_group() as tasks:
            async def sweep() -> None:
                while True:
                    await anyio.sleep(REAP_SECONDS)
                    await anyio.to_thread.run_sync(self.sessions.reap)

            tasks.start_soon(sweep)
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        import anyio
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        from assay.service import keys
        from assay.web.answers import refusal_response

        version = _header(scope, b"mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await _send_json(send, 400, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32022, "message": "this endpoint holds a run per session: use a handshake protocol version",
                "data": {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS), "requested": version}}})
            return
        authorization = _header(scope, b"authorization") or ""
        presented = authorization[7:].strip() if authorization[:7].lower() == "bearer " else None
        try:
            actor = await anyio.to_thread.run_sync(keys.authenticate, self.app.state.store,
                                                   self.app.state.settings.secret, presented, "agent")
        except BadInput as exc:
            await refusal_response(exc)(scope, receive, send)
            return
        session_id = _header(scope, b"mcp-session-id")
        if session_id is None:
            await self._open(scope, receive, send, actor)
            return
        session = self.sessions.get(session_id)
        if session is None or session.play is None or session.account != actor.account:  # another account's session does not exist
            await _send_json(send, 404, {"jsonrpc": "2.0", "id": None,
                                         "error": {"code": -32600, "message": "Session not found"}})
            return
        scope[_SLOT] = session.slot
        self.sessions.enter(session)
        status: list[int] = []

        async def watched(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            await self.manager.handle_request(scope, receive, watched)
        finally:
            self.sessions.leave(session)
        if scope.get("method") == "DELETE" and status and status[0] < 400:
            play = self.sessions.end(session_id)
            if play is not None:
                await anyio.to_thread.run_sync(play.close)

    async def _open(self, scope: dict[str, Any], receive: Any, send: Any, actor: Any) -> None:
        """A request without a session: the SDK opens one when it is an `initialize`, whose
        middleware leases the run (`_lease`); the session is known here by the id the response carries."""
        import anyio

        slot: dict[str, Any] = {"actor": actor, "play": None}
        scope[_SLOT] = slot
        opened: list[str] = []

        async def watched(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                found = dict(message.get("headers") or []).get(b"mcp-session-id")
                if found is not None:  # the response streams: its play is set before its result is sent
                    opened.append(found.decode("latin-1"))
                    self.sessions.open(opened[0], slot, actor.account)
            await send(message)

        try:
            await self.manager.handle_request(scope, receive, watched)
        finally:
            session = self.sessions.get(opened[0]) if opened else None
            if session is not None:
                self.sessions.leave(session)
                if slot["play"] is None:  # the opening failed (no run pending): no session to keep
                    self.sessions.end(opened[0])
            elif slot["play"] is not None:  # leased, but no session came of it: handed back
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(slot["play"].close)


def mount(app: Any) -> McpEndpoint:
    """Add `/mcp` to `app` (kept out of the OpenAPI document: MCP describes itself)."""
    from starlette.routing import Route

    endpoint = McpEndpoint(app)
    app.router.routes.append(Route(PATH, endpoint=endpoint, methods=["GET", "POST", "DELETE"],
                                   include_in_schema=False))
    app.state.mcp = endpoint
    return endpoint
