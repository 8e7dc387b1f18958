"""A fixed-latency OpenAI-compatible chat-completions server, for the latency benchmark.

    python benchmarks/latency_server.py --port 0 --latency 0.5

Prints ``READY <port>`` on stdout once it is listening; on SIGTERM or SIGINT it prints
``STATS {json}`` (the same object as ``GET /stats``) and exits 0.

Why it exists: ``benchmarks/latency.py`` measures how close a harness gets to the ideal
rate ``workers / latency`` when every model call takes a fixed time. That number only means
something if the model side is never the bottleneck, so this server does almost nothing:

* ``POST /v1/chat/completions`` answers after exactly ``--latency`` seconds (``asyncio.sleep``,
  never blocking the loop) with a valid ``ChatCompletion``: ``content`` null and one tool call
  ``finish`` with arguments ``{"claimed_success": false, "summary": "benchmark"}``,
  ``finish_reason`` ``"tool_calls"`` and ``usage``. Every Assay world offers ``finish``, so one
  Assay run is exactly one model call. The body must look like a chat request (a JSON object
  naming ``messages``; ``--strict`` parses it fully), 400 otherwise; its ``model`` is echoed
  back, nothing else in it is looked at.
* ``GET /v1/models`` lists the one model ``bench-model``.
* ``GET /stats`` returns ``{"requests", "max_in_flight", ...}`` (see ``Stats.snapshot``);
  ``GET /stats?reset=1`` returns the counters and then zeroes them, so a driver can read one
  measurement's figures without restarting the server.

Standard library only: one asyncio ``Protocol`` per connection with its own small HTTP/1.1
parser (keep-alive by default, ``Connection: close`` and HTTP/1.0 honoured, ``Content-Length``
bodies, ``Transfer-Encoding: chunked`` decoded, ``Expect: 100-continue`` answered, pipelined
requests answered in order). The listen backlog is 4096 and the open-files soft limit is raised
to the hard limit at start-up, so 1000+ concurrent connections queue in the kernel rather than
being refused. Each request costs one small task and a scan of its body. Measured with raw
asyncio clients sending 8.5 kB bodies (and a full ``json.loads`` of each, i.e. as ``--strict``):
~0.13 ms of CPU per request on a kept-alive connection, ~0.25 ms with a new connection per
request, so at 500 requests/s at most 7-13 % of one core. The ``lag`` figures in the stats (how
late responses left relative to arrival + latency) show whether it ever stops keeping up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import signal
import sys
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

MODEL_ID = "bench-model"
MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
BACKLOG = 4096

_MODEL_RE = re.compile(rb'"model"\s*:\s*"([^"\\]{1,200})"')
FINISH_ARGUMENTS = json.dumps({"claimed_success": False, "summary": "benchmark"})

REASONS = {
    100: "Continue", 200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
    411: "Length Required", 413: "Content Too Large", 417: "Expectation Failed",
    431: "Request Header Fields Too Large", 501: "Not Implemented",
}


class BadRequest(Exception):
    """A request this server cannot read; answered with `status` and the connection closed."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class Stats:
    """Counters for one measurement epoch (zeroed by ``GET /stats?reset=1``)."""

    def __init__(self) -> None:
        self.in_flight = 0  # chat requests received and not yet answered; survives a reset
        self.open_connections = 0  # survives a reset too
        self.total_requests = 0  # chat completions answered since start; survives a reset
        self.reset()

    def reset(self) -> None:
        self.since = time.time()
        self.requests = 0  # chat completions answered
        self.max_in_flight = self.in_flight
        self.connections = 0  # connections accepted
        self.chat_connections = 0  # connections that carried at least one chat request
        self.max_open_connections = self.open_connections
        self.by_status: dict[str, int] = {}
        self.other_requests = 0  # /v1/models, /stats, errors
        self.body_bytes = 0  # chat request bodies received, for the mean request size
        self.lag_sum = 0.0
        self.lag_max = 0.0
        self.first_request: float | None = None
        self.last_response: float | None = None

    def snapshot(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "total_requests": self.total_requests,
            "max_in_flight": self.max_in_flight,
            "in_flight": self.in_flight,
            "connections": self.connections,
            "chat_connections": self.chat_connections,
            "max_open_connections": self.max_open_connections,
            "open_connections": self.open_connections,
            "other_requests": self.other_requests,
            "by_status": dict(self.by_status),
            "mean_body_bytes": round(self.body_bytes / self.requests) if self.requests else None,
            # Lag: how much later than arrival + latency a chat response was written. Near zero
            # means the server kept its promise; large means the server itself was the bottleneck.
            "lag_ms_mean": round(self.lag_sum / self.requests * 1000, 3) if self.requests else None,
            "lag_ms_max": round(self.lag_max * 1000, 3),
            # Wall clock of the first chat request's arrival and the last chat response.
            "first_request": self.first_request,
            "last_response": self.last_response,
            "since": self.since,
        }


class Request:
    __slots__ = ("method", "target", "version", "headers", "body", "arrived", "keep_alive")

    def __init__(self, method: str, target: str, version: str, headers: dict[str, str],
                 body: bytes, arrived: float, keep_alive: bool) -> None:
        self.method, self.target, self.version = method, target, version
        self.headers, self.body, self.arrived, self.keep_alive = headers, body, arrived, keep_alive


def _decode_chunked(buf: bytearray, start: int) -> tuple[bytes, int] | None:
    """Decode a chunked body starting at ``buf[start]``: (body, end offset), or None if incomplete."""
    body = bytearray()
    pos = start
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            if len(buf) - pos > 1024:
                raise BadRequest(400, "chunk size line too long")
            return None
        size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise BadRequest(400, f"bad chunk size {size_text[:20]!r}") from None
        pos = eol + 2
        if size == 0:
            # Trailers (ignored), ended by an empty line.
            while True:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    return None
                if eol == pos:
                    return bytes(body), eol + 2
                pos = eol + 2
        if len(body) + size > MAX_BODY_BYTES:
            raise BadRequest(413, "body too large")
        if len(buf) < pos + size + 2:
            return None
        body += buf[pos:pos + size]
        if buf[pos + size:pos + size + 2] != b"\r\n":
            raise BadRequest(400, "chunk not followed by CRLF")
        pos += size + 2


class BenchServer:
    """What every connection shares: the latency, the counters, the response ids."""

    def __init__(self, latency: float, strict: bool = False) -> None:
        self.latency = latency
        self.strict = strict
        self.stats = Stats()
        self.serial = 0

    def completion_body(self, request: Request) -> bytes:
        """A ChatCompletion with one `finish` tool call; the request's model is echoed.

        By default the body is only checked to look like a chat request (a JSON object that
        mentions "messages"), and the model is picked out with a regular expression: a full
        `json.loads` of a ~9 kB forge request was the largest single cost in a profile of this
        server, and on a 2-core machine every cycle spent here is taken from the harness being
        measured. `--strict` parses every body fully instead.
        """
        body = request.body
        if self.strict:
            try:
                payload = json.loads(body)
            except ValueError as exc:
                raise BadRequest(400, f"request body is not JSON: {exc}") from None
            if not isinstance(payload, dict) or not isinstance(payload.get("messages"), list):
                raise BadRequest(400, "request body has no messages array")
            model = payload.get("model")
        else:
            if not body.lstrip().startswith(b"{") or b'"messages"' not in body:
                raise BadRequest(400, "request body is not a JSON object with messages")
            found = _MODEL_RE.search(body)
            model = found.group(1).decode("utf-8", "replace") if found else None
        self.serial += 1
        n = self.serial
        prompt_tokens = max(1, len(request.body) // 4)  # plausible, no tokenizer
        completion = {
            "id": f"chatcmpl-bench-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model if isinstance(model, str) and model else MODEL_ID,
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{
                        "id": f"call_bench_{n}",
                        "type": "function",
                        "function": {"name": "finish", "arguments": FINISH_ARGUMENTS},
                    }],
                },
                "logprobs": None,
                "finish_reason": "tool_calls",
            }],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 20,
                      "total_tokens": prompt_tokens + 20},
            "system_fingerprint": "latency-bench",
        }
        return json.dumps(completion, separators=(",", ":")).encode()


class Connection(asyncio.Protocol):
    """One client connection: parse requests as bytes arrive, answer each in arrival order."""

    def __init__(self, server: BenchServer) -> None:
        self.server = server
        self.stats = server.stats
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.last: asyncio.Task[None] | None = None  # the previous response, for ordering
        self.closing = False  # no more requests will be read
        self.sent_continue = False
        self.chat_seen = False
        self.pending = 0

    # --- asyncio.Protocol ------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.stats.connections += 1
        self.stats.open_connections += 1
        self.stats.max_open_connections = max(self.stats.max_open_connections,
                                              self.stats.open_connections)

    def connection_lost(self, exc: Exception | None) -> None:
        self.stats.open_connections -= 1
        self.transport = None

    def eof_received(self) -> bool:
        # The client will send nothing more; finish what is pending, then close.
        self.closing = True
        if self.pending == 0 and self.transport is not None:
            self.transport.close()
        return True

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.buf += data
        try:
            while not self.closing:
                request = self._parse_one()
                if request is None:
                    break
                self._dispatch(request)
        except BadRequest as exc:
            self.closing = True
            self.buf.clear()
            self._queue(self._error(exc.status, exc.detail, close=True))

    # --- parsing ---------------------------------------------------------

    def _parse_one(self) -> Request | None:
        buf = self.buf
        head_end = buf.find(b"\r\n\r\n")
        if head_end < 0:
            if len(buf) > MAX_HEADER_BYTES:
                raise BadRequest(431, "request head too large")
            return None
        lines = bytes(buf[:head_end]).decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ")
        except ValueError:
            raise BadRequest(400, f"bad request line {lines[0][:80]!r}") from None
        if not version.startswith("HTTP/1."):
            raise BadRequest(400, f"unsupported protocol {version[:20]!r}")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise BadRequest(400, f"bad header line {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()

        start = head_end + 4
        expect = headers.get("expect", "").lower()
        if expect and expect != "100-continue":
            raise BadRequest(417, f"cannot meet Expect: {expect}")
        te = headers.get("transfer-encoding", "").lower()
        if te:
            if te != "chunked":
                raise BadRequest(501, f"unsupported Transfer-Encoding {te!r}")
            decoded = _decode_chunked(buf, start)
            if decoded is None:
                self._maybe_continue(expect)
                return None
            body, end = decoded
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise BadRequest(400, "bad Content-Length") from None
            if length < 0:
                raise BadRequest(400, "bad Content-Length")
            if length > MAX_BODY_BYTES:
                raise BadRequest(413, "body too large")
            if len(buf) < start + length:
                self._maybe_continue(expect)
                return None
            body, end = bytes(buf[start:start + length]), start + length
        elif method in ("POST", "PUT", "PATCH"):
            raise BadRequest(411, "a POST needs Content-Length or chunked Transfer-Encoding")
        else:
            body, end = b"", start

        del buf[:end]
        self.sent_continue = False
        conn = headers.get("connection", "").lower()
        keep_alive = ("close" not in conn) if version == "HTTP/1.1" else ("keep-alive" in conn)
        if not keep_alive:
            self.closing = True
        return Request(method, target, version, headers, body, time.monotonic(), keep_alive)

    def _maybe_continue(self, expect: str) -> None:
        if expect == "100-continue" and not self.sent_continue and self.transport is not None:
            self.sent_continue = True
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    # --- answering ---------------------------------------------------------

    def _dispatch(self, request: Request) -> None:
        path = urlsplit(request.target).path.rstrip("/")
        if path.endswith("/chat/completions"):
            if request.method != "POST":
                self._queue(self._error(405, "use POST", close=not request.keep_alive))
                return
            self._queue(self._chat(request))
        elif path.endswith("/models") and request.method == "GET":
            body = json.dumps({"object": "list", "data": [
                {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "latency-bench"}]})
            self._queue(_ready(_response(200, body.encode(), request.keep_alive), request.keep_alive))
        elif path == "/stats" and request.method == "GET":
            self._queue(self._stats(request))
        else:
            self._queue(self._error(404, f"no route for {request.method} {path}",
                                    close=not request.keep_alive))

    def _queue(self, coro: Any) -> None:
        """Start answering now, but write after the previous response (pipelining order)."""
        self.pending += 1
        self.last = asyncio.get_running_loop().create_task(self._in_order(coro, self.last))

    async def _in_order(self, coro: Any, previous: asyncio.Task[None] | None) -> None:
        try:
            data, keep_alive, on_written = await coro
            if previous is not None and not previous.done():
                await asyncio.wait([previous])
            if self.transport is not None and not self.transport.is_closing():
                self.transport.write(data)
                if on_written is not None:
                    on_written()
                if not keep_alive:
                    self.closing = True
        finally:
            self.pending -= 1
            if self.closing and self.pending == 0 and self.transport is not None:
                self.transport.close()

    async def _chat(self, request: Request) -> tuple[bytes, bool, Any]:
        stats = self.stats
        if not self.chat_seen:
            self.chat_seen = True
            stats.chat_connections += 1
        if stats.first_request is None:
            stats.first_request = time.time()
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            body = self.server.completion_body(request)  # parse first: a bad body fails fast
            if self.server.latency > 0:
                await asyncio.sleep(request.arrived + self.server.latency - time.monotonic())
            data = _response(200, body, request.keep_alive)
            status = "200"
        except BadRequest as exc:
            data = _response(exc.status, _error_json(exc.detail), request.keep_alive)
            status = str(exc.status)
        finally:
            stats.in_flight -= 1

        def written() -> None:
            now = time.monotonic()
            stats.by_status[status] = stats.by_status.get(status, 0) + 1
            if status == "200":
                stats.requests += 1
                stats.total_requests += 1
                stats.body_bytes += len(request.body)
                lag = max(0.0, now - request.arrived - self.server.latency)
                stats.lag_sum += lag
                stats.lag_max = max(stats.lag_max, lag)
                stats.last_response = time.time()
            else:
                stats.other_requests += 1

        return data, request.keep_alive, written

    async def _stats(self, request: Request) -> tuple[bytes, bool, Any]:
        self.stats.other_requests += 1
        snapshot = self.stats.snapshot()
        if parse_qs(urlsplit(request.target).query).get("reset") == ["1"]:
            self.stats.reset()
        return _response(200, json.dumps(snapshot).encode(), request.keep_alive), request.keep_alive, None

    def _error(self, status: int, detail: str, *, close: bool) -> Any:
        self.stats.other_requests += 1
        self.stats.by_status[str(status)] = self.stats.by_status.get(str(status), 0) + 1
        return _ready(_response(status, _error_json(detail), not close), not close)


async def _ready(data: bytes, keep_alive: bool) -> tuple[bytes, bool, Any]:
    """A response that needs no waiting, in the shape `Connection._in_order` expects."""
    return data, keep_alive, None


def _error_json(detail: str) -> bytes:
    return json.dumps({"error": {"message": detail, "type": "invalid_request_error"}}).encode()


def _response(status: int, body: bytes, keep_alive: bool) -> bytes:
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n"
        "\r\n"
    )
    return head.encode("latin-1") + body


def _raise_open_files_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit: each connection is a file descriptor."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


async def serve(host: str, port: int, latency: float, strict: bool = False) -> dict[str, Any]:
    bench = BenchServer(latency, strict)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Connection(bench), host, port, backlog=BACKLOG,
                                      reuse_address=True)
    bound = server.sockets[0].getsockname()[1]
    print(f"READY {bound}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()
    return bench.stats.snapshot()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=0, help="0 = any free port (default)")
    ap.add_argument("--latency", type=float, default=0.5, help="seconds per chat completion")
    ap.add_argument("--strict", action="store_true",
                    help="json.loads every request body (default: a cheap shape check)")
    args = ap.parse_args(argv)
    if args.latency < 0:
        ap.error("--latency must be >= 0")
    _raise_open_files_limit()
    final = asyncio.run(serve(args.host, args.port, args.latency, args.strict))
    print("STATS " + json.dumps(final), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
