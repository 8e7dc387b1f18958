"""A fork server for `assay` command lines run from a shell script (the docs' runnable blocks).

Every `assay` line of a doc block used to start a new interpreter that imported the package again
(about a second of CPU a line, most of a doc page's cost). Here one process imports the package
once and waits on a Unix socket; `assay` on the script's PATH is a small client (`CLIENT`, run with
`python -I -S`: no site, no imports of note) that hands the server its argv, working directory,
environment and its own stdin, stdout and stderr (the descriptors themselves, SCM_RIGHTS), and
exits with the command's status. For each command the server forks a process that takes those
descriptors as 0, 1 and 2, that directory and that environment, and runs the console script's
`console()` exactly as `bin/assay` does, exiting through the interpreter's normal exit (atexit
hooks, flushed streams). So every shell form keeps its meaning (pipes, redirects, `$(...)`,
`VAR=x assay`, `if assay ...; then`, exit codes): only the imports are shared, not any state: each
command is a new process forked from a server that has imported modules and done nothing else.

Run as `python forkserver.py SOCKET`: it prints one line, `ready`, once it accepts commands.
"""

from __future__ import annotations

import array
import json
import os
import socket
import struct
import sys
from pathlib import Path
from typing import Any

# The `assay` the script runs: `python -I -S` (isolated, no site) with this as its body, so a
# command line costs the client a few milliseconds, not the package's imports.
CLIENT = r'''
import array, json, os, signal, socket, struct, sys


def main():
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(os.environ["ASSAY_FORK_SERVER"])
    payload = json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode("utf-8",
                                                                                           "surrogatepass")
    conn.sendmsg([struct.pack("!I", len(payload))],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
    conn.sendall(payload)
    got = b""
    while len(got) < 4:
        chunk = conn.recv(4 - len(got))
        if not chunk:
            sys.exit("assay: the fork server went away")
        got += chunk
    status = struct.unpack("!i", got)[0]
    if status < 0:  # killed by a signal: die of the same one, as the shell would have seen it
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


if __name__ == "__main__":
    main()
'''

# Modules not imported ahead: this file's own entry points and what starts machinery when imported.
NOT_AHEAD = ("assay.__main__", "assay.demo")


def warm() -> None:
    """Import every module of the package (what any command could import), and nothing more."""
    import importlib
    import pkgutil

    import assay

    for info in pkgutil.walk_packages(assay.__path__, "assay."):
        if info.name in NOT_AHEAD:
            continue
        try:
            importlib.import_module(info.name)
        except Exception:  # noqa: BLE001 - an optional extra not installed: the command imports it itself
            pass


def _recv_exactly(conn: socket.socket, n: int) -> bytes:
    got = b""
    while len(got) < n:
        chunk = conn.recv(n - len(got))
        if not chunk:
            raise EOFError("the client went away")
        got += chunk
    return got


def _request(conn: socket.socket) -> tuple[list[int], dict[str, Any]]:
    fds = array.array("i")
    header, ancdata, _flags, _addr = conn.recvmsg(4, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    if len(header) < 4:
        header += _recv_exactly(conn, 4 - len(header))
    (size,) = struct.unpack("!I", header)
    request = json.loads(_recv_exactly(conn, size).decode("utf-8", "surrogatepass"))
    return list(fds), request


def _status(wait_status: int) -> int:
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def serve(path: str) -> tuple[list[int], dict[str, Any]]:
    """Accept commands forever; returns only in a command's own process, with its descriptors and
    request. For each command: a process that waits for it and sends its status back, and under
    it the command's process (so commands may run at once, as in `assay a | assay b`)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        while True:  # reap the finished waiters
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        try:
            fds, request = _request(conn)
        except (OSError, EOFError, ValueError):
            conn.close()
            continue
        if os.fork() == 0:  # the waiter
            listener.close()
            command = os.fork()
            if command == 0:
                conn.close()
                return fds, request
            for fd in fds:
                os.close(fd)
            _, wait_status = os.waitpid(command, 0)
            try:
                conn.sendall(struct.pack("!i", _status(wait_status)))
            finally:
                os._exit(0)
        conn.close()
        for fd in fds:
            os.close(fd)


def become(fds: list[int], request: dict[str, Any]) -> None:
    """This process takes the client's descriptors (as 0, 1 and 2), directory, environment and argv."""
    import types

    for target, fd in enumerate(fds[:3]):
        if fd != target:
            os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    # the standard streams already stand on descriptors 0, 1 and 2, now the client's (the server
    # flushed its own output and never read its input); buffered as start-up would buffer these
    sys.stdout.reconfigure(line_buffering=os.isatty(1))
    # as under bin/assay: a process spawned by `multiprocessing` prepares its __main__ from that script
    main = types.ModuleType("__main__")
    script = Path(sys.executable).parent / "assay"
    if script.is_file():
        main.__file__ = str(script)
    sys.modules["__main__"] = main


if __name__ == "__main__":
    warm()
    taken, asked = serve(sys.argv[1])
    become(taken, asked)
    from assay.cli import console

    sys.exit(console())
