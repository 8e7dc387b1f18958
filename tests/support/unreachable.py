"""Endpoints nobody answers, on loopback, for tests of failures to connect.

- `closed_port()`: a port bound and closed at once: a connection to it is refused.
- `blackhole()`: a listening socket whose backlog is full and which never accepts, so a new
  connection's handshake is never completed and the connect hangs until the client's timeout
  (Linux drops the SYN of a full queue). Use it with a short connect timeout injected.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def blackhole() -> Iterator[str]:
    """Yields `http://127.0.0.1:PORT` of a listener whose connects hang."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fill: list[socket.socket] = []
    try:
        for _ in range(3):  # fill the accept queue (a backlog of 0 still takes one or two)
            c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            c.settimeout(0.2)
            try:
                c.connect(("127.0.0.1", port))
            except OSError:
                pass
            fill.append(c)
        yield f"http://127.0.0.1:{port}"
    finally:
        for c in fill:
            c.close()
        listener.close()
