"""A fork server for the `assay` commands tests run as processes (`assay_command()`).

A test that runs `assay ...` as a process used to start a new interpreter that imported the package
again: about a second of CPU a command, most of the cost of the docs' runnable blocks and of the CLI
tests. Here one process per test worker imports the package once and waits on a Unix socket;
`assay_command()` is a small client (`CLIENT`, run with `python -I -S`: no site, no imports of
note) that hands the server its argv, working directory, environment and its own stdin, stdout and
stderr (the descriptors themselves, SCM_RIGHTS), and exits with the command's status. For each command the server forks a process that takes those
descriptors as 0, 1 and 2, that directory and that environment, and runs the console script's
`console()` exactly as `bin/assay` does, exiting through the interpreter's normal exit (atexit
hooks, flushed streams). So every shell form keeps its meaning (pipes, redirects, `$(...)`,
`VAR=x assay`, `if assay ...; then`, exit codes): only the imports are shared, not any state: each
command is a new process forked from a server that has imported modules and done nothing else.
A client that dies (a test's timeout kills it) takes its command with it (SIGKILL).

What differs from the console script, so where a test keeps `bin/assay`: the command is not the
client's process (a test that signals a command, or reads its pid, kills and resumes, starts the
console script); the interpreter is the server's, so an environment that changes how Python starts
(`PYTHONHASHSEED`, `PYTHONWARNINGS`, ... anything `PYTHON*` but `PYTHONPATH`) makes the client exec
the console script instead, and `PYTHONPATH`'s new entries are put on `sys.path` but cannot replace
a module the server imported; every module of the package is imported ahead (the console script's
own start-up is tested by tests/test_install.py and the `real_cli` tests).

Run as `python forkserver.py SOCKET`: it prints one line, `ready`, once it accepts commands.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# The `assay` the script runs: `python -I -S` (isolated, no site) with this as its body, so a
# command line costs the client a few milliseconds, not the package's imports.
CLIENT = r'''
import array, json, os, signal, socket, struct, sys


def main():
    interpreter = {k: v for k, v in os.environ.items() if k.startswith("PYTHON") and k != "PYTHONPATH"}
    if interpreter != SERVER_INTERPRETER:  # Python would start otherwise than the server did
        os.execv(CONSOLE_SCRIPT, [CONSOLE_SCRIPT, *sys.argv[1:]])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(SOCKET)
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

def interpreter_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that change how Python starts (PYTHONPATH apart: it only adds to sys.path)."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k != "PYTHONPATH"}


def console_script() -> Path:
    """The `assay` console script of the interpreter running the tests."""
    beside = Path(sys.executable).parent / "assay"
    return beside if beside.exists() else Path(shutil.which("assay") or "assay")


def client_text(socket_path: Path, env: Mapping[str, str]) -> str:
    return (f"#!{sys.executable} -IS\nSOCKET = {str(socket_path)!r}\nCONSOLE_SCRIPT = {str(console_script())!r}\n"
            f"SERVER_INTERPRETER = {interpreter_env(env)!r}\n{CLIENT}")


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


def _wait(command: int, conn: socket.socket) -> int:
    """The command's wait status; if the client goes away first (killed: a test's timeout), the
    command is killed too, as the console script would have been."""
    pidfd = os.pidfd_open(command)
    try:
        while True:
            ready, _, _ = select.select([pidfd, conn], [], [])
            if pidfd in ready:
                break
            if not conn.recv(1):  # EOF: the client is gone
                os.kill(command, 9)
                break
    finally:
        os.close(pidfd)
    return os.waitpid(command, 0)[1]


def serve(path: str) -> tuple[list[int], dict[str, Any]]:
    """Accept commands forever; returns only in a command's own process, with its descriptors and
    request. For each command: a process that waits for it and sends its status back, and under
    it the command's process (so commands may run at once, as in `assay a | assay b`)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)

    def reap(_signum: int, _frame: Any) -> None:  # the finished waiters, as they finish (their CPU time
        while True:                                # is then counted to this process, and to the tests')
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return

    signal.signal(signal.SIGCHLD, reap)
    parent = os.getppid()
    print("ready", flush=True)
    while True:
        # the server ends when the tests' process does, however it ends (its parent changes);
        # PR_SET_PDEATHSIG would follow the thread that started it, not the process
        if not select.select([listener], [], [], 1.0)[0]:
            if os.getppid() != parent:
                os._exit(0)
            continue
        conn, _ = listener.accept()
        try:
            fds, request = _request(conn)
        except (OSError, EOFError, ValueError):
            conn.close()
            continue
        if os.fork() == 0:  # the waiter
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            listener.close()
            command = os.fork()
            if command == 0:
                conn.close()
                return fds, request
            try:
                for fd in fds:
                    os.close(fd)
                conn.sendall(struct.pack("!i", _status(_wait(command, conn))))
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
    # PYTHONPATH's entries go where start-up puts them, after the script's directory
    added = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    sys.path[1:1] = added
    # the standard streams already stand on descriptors 0, 1 and 2, now the client's (the server
    # flushed its own output and never read its input); buffered as start-up would buffer these
    sys.stdout.reconfigure(line_buffering=os.isatty(1))  # type: ignore[union-attr]
    # as under bin/assay: a process spawned by `multiprocessing` prepares its __main__ from that script
    main = types.ModuleType("__main__")
    script = console_script()
    if script.is_file():
        main.__file__ = str(script)
    sys.modules["__main__"] = main


# -- in the tests' process: one server per process, started on first use ---------------------------

_lock = threading.Lock()
_client: Path | None = None


def assay_command() -> list[str]:
    """The argv that runs `assay` as a process through this process's fork server (started on the
    first call, stopped when this process exits): `[*assay_command(), "run", "forge", ...]`."""
    global _client
    with _lock:
        if _client is None:
            _client = _start()
        return [str(_client)]


def _start() -> Path:
    home = Path(tempfile.mkdtemp(prefix="assay-fork-"))  # short: a Unix socket's path is at most 107 bytes
    socket_path = home / "s"
    env = dict(os.environ)
    server = subprocess.Popen([sys.executable, __file__, str(socket_path)], cwd=home, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                              start_new_session=True)

    def stop() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(10)
        shutil.rmtree(home, ignore_errors=True)

    atexit.register(stop)
    assert server.stdout is not None
    ready = server.stdout.readline()
    if ready != "ready\n":
        raise RuntimeError(f"the assay fork server did not start (said {ready!r}, exit {server.poll()})")
    bindir = home / "bin"
    bindir.mkdir()
    client = bindir / "assay"
    client.write_text(client_text(socket_path, env), encoding="utf-8")
    client.chmod(0o755)
    return client


if __name__ == "__main__":
    sys.path[0] = str(console_script().parent)  # as under bin/assay, not this file's directory
    warm()
    taken, asked = serve(sys.argv[1])
    become(taken, asked)
    from assay.cli import console

    sys.exit(console())
