"""Model endpoints as the harness may name them: which URLs are this machine, and a URL fit to
print. A leaf module (it imports nothing of Assay's), shared by the agent adapter and the judge,
which may not import each other's rooms."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit, urlunsplit

REDACTED = "[REDACTED]"


def is_loopback(url: str) -> bool:
    """True when `url` points at this machine (localhost, 127.0.0.0/8, ::1): the only endpoint
    that may be reached without an API key."""
    host = urlsplit(url).hostname
    if host is None:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def without_credentials(url: str) -> str:
    """`url` with any password in its userinfo replaced: a base URL can carry a secret too."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{parts.username or ''}:{REDACTED}@{host}" + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


#: Seconds to open a connection to a model endpoint or an Assay server before giving up on that
#: attempt; separate from the read timeout, which a slow model legitimately needs.
CONNECT_TIMEOUT = 5.0


def _chain(exc: BaseException | None) -> list[BaseException]:
    """`exc` and its causes, outermost first (each once)."""
    found: list[BaseException] = []
    while exc is not None and all(exc is not seen for seen in found) and len(found) < 16:
        found.append(exc)
        exc = exc.__cause__ or exc.__context__
    return found


def connect_failure(exc: BaseException) -> str | None:
    """Why a request could not reach its endpoint, in a few words (`connection refused`, `name not
    resolved`, `connect timed out`, …), or None when `exc` is not a failure to connect. Read off
    the whole chain of causes: a client may wrap a refused connection in a timeout error (openai's
    aiohttp transport does), so the innermost cause decides."""
    chain = _chain(exc)
    names = [type(e).__name__ for e in chain]
    for e in chain:
        if isinstance(e, ConnectionRefusedError):
            return "connection refused"
    for e in chain:
        if type(e).__name__ == "gaierror" or "DNS" in type(e).__name__:
            return "name not resolved"
    if any(n in ("ConnectTimeout", "ConnectionTimeoutError") for n in names):
        return "connect timed out"
    for e in chain:
        if isinstance(e, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)):
            return "connection lost"
    if any(n in ("ReadTimeout", "SocketTimeoutError", "WriteTimeout", "PoolTimeout") for n in names):
        return "no answer in time"
    if any(n in ("RemoteProtocolError", "ServerDisconnectedError", "ReadError", "ClientPayloadError") for n in names):
        return "connection lost"
    for e in chain:
        if isinstance(e, OSError) and e.strerror:
            return e.strerror.lower()
    if any(n in ("ConnectError", "APIConnectionError", "APITimeoutError", "ClientConnectorError") for n in names):
        return "connection failed"
    return None


#: What `connect_failure` says when a connection was made and then failed: not an unreachable endpoint.
AFTER_CONNECT = ("no answer in time", "connection lost")


def refused(exc: BaseException) -> bool:
    """Whether `exc` says nobody listens there (refused, or a name that does not resolve): a
    failure that retrying within seconds cannot mend."""
    return connect_failure(exc) in ("connection refused", "name not resolved")


def unreachable(what: str, url: str, exc: BaseException) -> str:
    """One line: `{what} {url} unreachable: {cause}`, the URL without credentials."""
    return f"{what} {without_credentials(url)} unreachable: {connect_failure(exc) or type(exc).__name__}"
