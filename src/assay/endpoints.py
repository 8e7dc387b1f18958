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
