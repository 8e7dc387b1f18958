"""Agents played where they can touch nothing but their conversation.

A `python:` agent is the user's code; the harness holds worlds, hidden truths, seeds, the scorer
and the store. So the agent is never imported here: it is played by a worker process
(`sandbox_worker.py`, standard library only) inside Debian's bubblewrap, which sees

- a read-only view of the system (/usr and the /bin, /lib links, a few files of /etc: name
  resolution, certificates, users) and of the interpreter (`sys.base_prefix`, and the virtualenv
  `sys.prefix` for the agent's own imports);
- the agent's file, and its directory read-only as it was when the worker started (each entry
  bound on its own: none that is, or holds, a protected path: the store, its WAL/SHM/journal and
  `secret` files, the default data directory, a suite in use, the assay package with its suites);
  for `python:module:NAME`, the directory the module was found in. A directory that is `/`,
  `$HOME` or above it, or a shared temporary directory, is never bound: only the agent's file;
- a private tmpfs as /tmp and working directory (HOME), a fresh /proc in its own PID namespace
  where the worker is pid 1 (no process of the harness, nor bwrap, is there to read), its own
  user, IPC and UTS namespaces, no capabilities, and no new user namespaces; the network stays
  (an agent may call a model);
- of assay itself, only the scripted reference agents (`assay.agents.reference`, with the two
  stdlib-only modules it imports), which an agent may build on: nothing that holds a suite, a
  store or the scorer;
- an environment of PATH, HOME, LANG and the variables the user named (`--agent-env NAME`), set
  as the process's environment (never on a command line, which /proc shows), and an address-space
  limit (`--agent-memory`, RLIMIT_AS) set by the worker before the agent's module is imported.

The harness sends each turn (messages, tools) as JSON and reads one message back (the worker's
docstring has the protocol); the worker never holds a world, a scenario, a store URL, a seed or
the scorer. A `Pool` keeps workers between runs (start-up is paid once per worker, not per run)
and starts them as runs need them, so as many play side by side as the executor has runs in
flight. A worker that dies, overstays or answers garbage costs only its current run, and is
killed and replaced.

Where bwrap is missing, `Launch.bwrap` is None and the same worker runs as a plain subprocess
(`assay run` warns; `assay submit` and the service refuse such an agent).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The default address-space limit of an agent's process (`--agent-memory`).
DEFAULT_MEMORY = 2 * 1024**3
#: Seconds a worker may take to start and import the agent's module.
START_SECONDS = 30.0
#: The longest answer a worker may send (a line of JSON).
MAX_FRAME = 64 * 1024 * 1024
#: The Debian package that provides bwrap.
PACKAGE = "bubblewrap"
#: Paths (os.pathsep-separated) the sandbox never shows, inherited by the harness's child processes.
PROTECT_ENV = "ASSAY_SANDBOX_PROTECT"

WORKER = Path(__file__).resolve().with_name("sandbox_worker.py")
INSIDE_WORKER = "/run/assay-agent/worker.py"
#: Where the sandbox offers the one part of assay an agent may use: the scripted reference agents
#: (`from assay.agents.reference import Diligent`), public baselines that see what any agent sees.
INSIDE_LIB = "/run/assay-agent/lib"
_LIBRARY = ("errors.py", "agents/reference.py", "agents/reference_campaign.py")
INSIDE_HOME = "/tmp/work"
#: The uid and gid the agent has inside its user namespace (nobody).
INSIDE_ID = "65534"
_ETC = ("resolv.conf", "hosts", "host.conf", "nsswitch.conf", "gai.conf", "passwd", "group", "localtime",
        "ssl", "ca-certificates", "ca-certificates.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
        "alternatives", "mime.types", "protocols", "services", "os-release", "timezone")
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")
#: A directory with more entries than this is not bound entry by entry: only the agent's file is.
MAX_ENTRIES = 512


def find_bwrap() -> str | None:
    """The bwrap executable on PATH, or None (tests replace this to simulate its absence)."""
    return shutil.which("bwrap")


def missing_line(what: str) -> str:
    """The one line that refuses an unsandboxed `python:` agent where it must be sandboxed."""
    return (f"{what} needs bubblewrap to sandbox a python: agent, and bwrap is not installed "
            f"(Debian: apt-get install {PACKAGE})")


# -- what is never shown ---------------------------------------------------------------------------


def store_files(db_path: str | os.PathLike[str]) -> list[Path]:
    """A SQLite store's file, its WAL, SHM and journal, and the `secret` beside it."""
    path = Path(db_path).expanduser().resolve()
    return [path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal")), path.with_name("secret")]


def _sqlite_file(url: str | None) -> str | None:
    if not url or not url.startswith("sqlite"):
        return None
    _, _, rest = url.partition(":///")
    rest = rest.split("?", 1)[0]
    return rest if rest and rest != ":memory:" else None


#: Bumped whenever something new is protected: a worker started before is not used again.
_generation = 0


def protect(*paths: str | os.PathLike[str] | None) -> None:
    """Never show these paths to an agent (nor what is inside them), in this process and in the
    processes it starts (Ray workers, the async executor's children inherit the environment).
    Workers started before are retired (their view was laid out without these paths hidden)."""
    global _generation
    known = [p for p in os.environ.get(PROTECT_ENV, "").split(os.pathsep) if p]
    covered = protected_paths()
    added = False
    for path in paths:
        if path is None:
            continue
        resolved = Path(path).expanduser().resolve()
        if not any(_within(resolved, p) for p in covered):  # already hidden: keep the workers
            known.append(str(resolved))
            covered.append(resolved)
            added = True
    if added:
        os.environ[PROTECT_ENV] = os.pathsep.join(known)
        _generation += 1


def protect_store(url: str | None) -> None:
    """Protect a store's files (a SQLite store: the file and its companions; else nothing local)."""
    path = _sqlite_file(url)
    if path is not None:
        protect(*store_files(path))


def protected_paths() -> list[Path]:
    """Everything an agent may never see: the assay package (its built-in suites hold hidden
    truths), the default data directory (the default store and its secret), `ASSAY_DB`'s files,
    and whatever was `protect`ed."""
    out = [Path(__file__).resolve().parents[1]]
    try:
        import platformdirs

        out.append(Path(platformdirs.user_data_dir("assay")).resolve())
    except Exception:  # noqa: BLE001 - then ~/.local/share/assay, where it is on Linux
        out.append((Path.home() / ".local" / "share" / "assay").resolve())
    db = _sqlite_file(os.environ.get("ASSAY_DB"))
    if db is not None:
        out.extend(store_files(db))
    out.extend(Path(p) for p in os.environ.get(PROTECT_ENV, "").split(os.pathsep) if p)
    return out


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


# -- how a worker is started -----------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The agent a worker plays: a file (`python:FILE.py:NAME`) or a module (`python:module:NAME`).

    `item` is the agent's own file or top-level package directory, `home` the directory it was
    found in (its siblings import from there)."""

    attr: str
    item: Path
    home: Path
    file: Path | None = None
    module: str | None = None


@dataclass(frozen=True)
class Launch:
    """How a pool starts its workers: the agent, its limits, and bwrap (None: a plain subprocess)."""

    target: Target
    memory: int = DEFAULT_MEMORY
    env_names: tuple[str, ...] = ()
    bwrap: str | None = None

    def config(self) -> str:
        t = self.target
        home = str(t.home)
        return json.dumps({
            "file": str(t.file) if t.file else None, "module": t.module, "attr": t.attr,
            # a file's directory comes first (as a script's does); a module's last, as `python -m`
            # from that directory would find it, never shadowing an installed module
            "paths": [home] if t.file else [],
            "paths_last": ([] if t.file else [home]) + ([INSIDE_LIB] if self.bwrap else []),
            "memory": self.memory, "die_with_parent": self.bwrap is None})

    def env(self, home: str) -> dict[str, str]:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home if self.bwrap is None else "/tmp",
               "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        for name in self.env_names:
            if name in os.environ:
                env[name] = os.environ[name]
        return env

    def argv(self) -> list[str]:
        python = sys.executable
        if self.bwrap is None:
            return [python, "-I", str(WORKER), self.config()]
        return [self.bwrap, *self.layout(), "--", python, "-I", INSIDE_WORKER, self.config()]

    def layout(self) -> list[str]:
        """bwrap's arguments: namespaces, then the mounts in order (later ones cover earlier)."""
        args = ["--unshare-user", "--uid", INSIDE_ID, "--gid", INSIDE_ID, "--unshare-pid", "--unshare-ipc",
                "--unshare-uts", "--unshare-cgroup-try", "--disable-userns", "--cap-drop", "ALL",
                "--die-with-parent", "--new-session", "--as-pid-1"]
        roots: list[Path] = []

        def bind(path: Path) -> None:
            args.extend(["--ro-bind", str(path), str(path)])
            roots.append(path)

        for name in _SYSTEM:
            path = Path(name)
            if path.is_symlink():
                args.extend(["--symlink", os.readlink(path), name])
            elif path.is_dir():
                bind(path)
        for name in _ETC:
            path = Path("/etc") / name
            if path.exists():
                bind(path)
        args.extend(["--proc", "/proc", "--dev", "/dev", "--size", str(min(self.memory, 1 << 30)), "--tmpfs", "/tmp",
                     "--dir", INSIDE_HOME, "--chdir", INSIDE_HOME])
        protected = protected_paths()
        interpreter = _interpreter_roots()
        target = self.target
        item, home = target.item.resolve(), target.home.resolve()
        if not any(_within(home, r) for r in interpreter):  # an installed module is shown already
            entries = _entries(home, item, protected)
            if entries is None:
                bind(item)
            else:
                args.extend(["--tmpfs", str(home)])
                for entry in entries:
                    if entry.is_symlink():  # as a link: it resolves inside the sandbox, or nowhere
                        args.extend(["--symlink", os.readlink(entry), str(entry)])
                    else:
                        bind(entry)
        for root in interpreter:
            bind(root)
        args.extend(["--ro-bind", str(WORKER), INSIDE_WORKER])
        package = Path(__file__).resolve().parents[1]
        for init in ("__init__.py", "agents/__init__.py"):  # empty: nothing else of assay comes along
            args.extend(["--ro-bind", os.devnull, f"{INSIDE_LIB}/assay/{init}"])
        for name in _LIBRARY:
            args.extend(["--ro-bind", str(package / name), f"{INSIDE_LIB}/assay/{name}"])
        for path in protected:  # masks last: nothing protected shows through any bound root
            if not path.exists() or not any(_within(path, r) and path != r for r in roots):
                continue
            if path.is_dir():
                args.extend(["--tmpfs", str(path)])
            else:
                args.extend(["--ro-bind", os.devnull, str(path)])
        return args


def _interpreter_roots() -> list[Path]:
    """The interpreter's installation and the virtualenv, outside what the system binds already."""
    out: list[Path] = []
    for prefix in dict.fromkeys((sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix)):
        path = Path(prefix).resolve()
        if any(_within(path, Path(s)) for s in _SYSTEM) or any(_within(path, o) for o in out):
            continue
        out = [o for o in out if not _within(o, path)] + [path]
    return out


def _entries(home: Path, item: Path, protected: list[Path]) -> list[Path] | None:
    """The entries of the agent's directory to bind one by one, or None: bind only its own file."""
    user_home = Path.home().resolve()
    if home == Path("/") or _within(user_home, home) or any(_within(home, Path(t)) for t in _SHARED_TMP if t != "/tmp"):
        return None
    if str(home) in _SHARED_TMP or any(_within(home, p) for p in protected):
        return None
    try:
        names = sorted(os.listdir(home))
    except OSError:
        return None
    if len(names) > MAX_ENTRIES:
        return None
    out = []
    for name in names:
        entry = home / name
        real = entry.resolve() if not entry.is_symlink() else entry
        if any(_within(p, real) for p in protected):
            continue  # it is, or holds, something protected
        out.append(entry)
    return out


# -- the failures a worker reports -----------------------------------------------------------------


class AgentRaised(Exception):
    """The agent raised in its process: its run is `crashed`, with the agent's traceback."""

    def __init__(self, failure: dict[str, Any], *, creating: bool = False) -> None:
        self.type_name = str(failure.get("type") or "Exception")
        self.text = str(failure.get("message") or "")
        self.traceback = str(failure.get("traceback") or "")
        self.creating = creating
        super().__init__(self.text)


class AgentDied(Exception):
    """The agent's process ended in the middle of a turn: its run is `crashed`."""


class AgentGarbage(Exception):
    """The agent's process answered what is not the protocol: its run is `empty`."""


class SandboxFailed(Exception):
    """A worker could not be started (the harness's fault, not the agent's): its run is `error`."""


# -- one worker ------------------------------------------------------------------------------------

_live: weakref.WeakSet[Worker] = weakref.WeakSet()


class Worker:
    """One agent process and its two pipes. Used by one run at a time."""

    def __init__(self, launch: Launch) -> None:
        self._scratch = tempfile.mkdtemp(prefix="assay-agent-") if launch.bwrap is None else None
        home = self._scratch or INSIDE_HOME
        self.proc = subprocess.Popen(
            launch.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
            start_new_session=True, env=launch.env(home), cwd=self._scratch or "/")
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._out, self._in = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self._out, False)
        os.set_blocking(self._in, False)
        self._buf = bytearray()
        self.generation = _generation
        self.ready = False
        self.is_class = False
        _live.add(self)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def unasked(self) -> bool:
        """Whether the worker has sent something between turns (it is out of step)."""
        return bool(self._buf)

    def _died(self) -> AgentDied:
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        if code is None:
            return AgentDied("the agent's process closed its answer pipe")
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals.__members__.values() else str(-code)
            return AgentDied(f"the agent's process was killed by {name}")
        return AgentDied(f"the agent's process exited with code {code}")

    def _frame(self) -> bytes | None:
        nl = self._buf.find(b"\n")
        if nl < 0:
            if len(self._buf) > MAX_FRAME:
                raise AgentGarbage(f"the agent's process sent more than {MAX_FRAME} bytes without a message end")
            return None
        line = bytes(self._buf[:nl])
        del self._buf[:nl + 1]
        return line

    def _fill(self) -> bool:
        """Read what the pipe holds; False when there was nothing yet. EOF: AgentDied."""
        try:
            chunk = os.read(self._in, 1 << 20)
        except BlockingIOError:
            return False
        except OSError as exc:
            raise self._died() from exc
        if not chunk:
            raise self._died()
        self._buf += chunk
        return True

    @staticmethod
    def _decode(line: bytes) -> dict[str, Any]:
        try:
            frame = json.loads(line)
        except ValueError:
            frame = None
        if not isinstance(frame, dict):
            raise AgentGarbage(f"the agent's process answered what is not a protocol message: {line[:80]!r}")
        return frame

    # -- async (the drivers) --------------------------------------------------------------------

    async def _wait(self, fd: int, writing: bool) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def wake() -> None:
            if not done.done():
                done.set_result(None)

        (loop.add_writer if writing else loop.add_reader)(fd, wake)
        try:
            await done
        finally:
            (loop.remove_writer if writing else loop.remove_reader)(fd)

    async def read(self) -> dict[str, Any]:
        while True:
            line = self._frame()
            if line is not None:
                return self._decode(line)
            if not self._fill():
                await self._wait(self._in, False)

    async def write(self, frame: dict[str, Any]) -> None:
        data = memoryview(json.dumps(frame).encode("utf-8") + b"\n")
        while data:
            try:
                n = os.write(self._out, data)
            except BlockingIOError:
                await self._wait(self._out, True)
                continue
            except OSError as exc:  # a broken pipe: the process is gone
                raise self._died() from exc
            data = data[n:]

    async def start(self) -> None:
        """Wait for the worker's first words: it loaded the agent, or why it could not."""
        self._hello(await self.read())

    def _hello(self, frame: dict[str, Any]) -> None:
        if "load_error" in frame:
            raise SandboxFailed(str(frame["load_error"]))
        if frame.get("ready") is not True:
            raise AgentGarbage("the agent's process did not start with the protocol's first message")
        self.ready, self.is_class = True, bool(frame.get("class"))

    # -- sync (loading an agent, before any loop) -----------------------------------------------

    def start_sync(self, seconds: float = START_SECONDS) -> None:
        deadline = time.monotonic() + seconds
        while True:
            line = self._frame()
            if line is not None:
                return self._hello(self._decode(line))
            if self._fill():
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise SandboxFailed(f"the agent's process did not start within {seconds:g} s")
            select.select([self._in], [], [], left)

    def send_end(self) -> bool:
        """Tell the worker its run is over (no answer comes); False if it cannot take it now."""
        if self._buf:
            return False  # something unasked-for is waiting: the worker is out of step
        try:
            return os.write(self._out, b'{"op": "end"}\n') > 0
        except OSError:
            return False

    def kill(self) -> None:
        _live.discard(self)
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()  # type: ignore[union-attr]
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a SIGKILLed process ends
            pass
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


@atexit.register
def _kill_all() -> None:
    for worker in list(_live):
        worker.kill()


# -- the pool --------------------------------------------------------------------------------------


class Pool:
    """Workers kept between runs. `take` gives an idle one or None; `spawn` starts another; `give`
    takes one back at the end of a run; `close` kills them all (a later run starts new ones)."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self._idle: list[Worker] = []
        self._all: set[Worker] = set()
        self._lock = threading.Lock()
        self.started = 0

    def take(self) -> Worker | None:
        stale: list[Worker] = []
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive and worker.generation == _generation:
                    return worker
                self._all.discard(worker)
                stale.append(worker)
        for worker in stale:
            worker.kill()
        return None

    def spawn(self) -> Worker:
        try:
            worker = Worker(self.launch)
        except OSError as exc:
            raise SandboxFailed(f"could not start the agent's process: {exc}") from None
        with self._lock:
            self._all.add(worker)
            self.started += 1
        return worker

    def give(self, worker: Worker) -> None:
        with self._lock:
            keep = worker in self._all and worker.ready and worker.alive
            if keep and worker.send_end():
                self._idle.append(worker)
                return
            self._all.discard(worker)
        worker.kill()

    def keep(self, worker: Worker) -> None:
        """An idle worker that has played no run yet (a probe)."""
        with self._lock:
            self._idle.append(worker)

    def discard(self, worker: Worker) -> None:
        with self._lock:
            self._all.discard(worker)
            if worker in self._idle:
                self._idle.remove(worker)
        worker.kill()

    def close(self) -> None:
        with self._lock:
            workers, self._all, self._idle = list(self._all), set(), []
        for worker in workers:
            worker.kill()

    @property
    def size(self) -> int:
        with self._lock:
            return len(self._all)


_runs = itertools.count(1)


class SandboxedAgent:
    """The harness's side of one run's agent: each call is a turn sent to a worker of the pool.

    A call returns an awaitable (the drivers await it under the run's time budget; a cancelled turn
    kills the worker, whose state is then unknown). `aopen` takes a worker before the first turn;
    `close` gives it back when the run ends (dropping the agent does too)."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._worker: Worker | None = None
        self._run = next(_runs)
        self._seq = 0
        self._shown = 0  # messages of this run the worker holds already (each turn sends the rest)

    async def aopen(self) -> None:
        if self._worker is not None:
            return
        worker = self._pool.take()
        if worker is None:
            worker = self._pool.spawn()
            try:
                await worker.start()
            except BaseException as exc:
                self._pool.discard(worker)
                if isinstance(exc, (AgentDied, AgentGarbage)):
                    raise SandboxFailed(f"the agent's process failed to start: {exc}") from None
                raise
        self._worker = worker

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return self._turn(messages, tools)

    async def _turn(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        await self.aopen()
        worker = self._worker
        assert worker is not None
        self._seq += 1
        try:
            if worker.unasked:
                raise AgentGarbage("the agent's process sent what it was not asked for")
            ask: dict[str, Any] = {"op": "turn", "seq": self._seq, "run": self._run, "base": self._shown,
                                   "new": messages[self._shown:]}
            if self._shown == 0:
                ask["tools"] = tools
            await worker.write(ask)
            frame = await worker.read()
            if frame.get("seq") != self._seq:
                raise AgentGarbage("the agent's process answered out of turn")
        except BaseException:  # overstayed (cancelled), died, or out of step: this worker is done
            self._worker, self._shown = None, 0
            self._pool.discard(worker)
            raise
        if "reply" in frame:
            self._shown = len(messages)
            return _reply(frame["reply"])
        if "raised" in frame or "create_failed" in frame:
            self._shown = len(messages)
            creating = "create_failed" in frame
            raise AgentRaised(frame["create_failed" if creating else "raised"], creating=creating)
        self._worker, self._shown = None, 0
        self._pool.discard(worker)
        raise AgentGarbage("the agent's process answered what is not a protocol message")

    def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            self._pool.give(worker)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit, say
            pass


_EMPTY = {"bytes": b"", "bytearray": b"", "tuple": (), "set": set()}


def _reply(value: Any) -> Any:
    """A worker's answer as the engine reads it (the same status and reason as in-process)."""
    if isinstance(value, dict) and len(value) == 1 and "__not_message__" in value:
        return _EMPTY.get(str(value["__not_message__"]), ())
    return value


def probe(pool: Pool) -> Worker:
    """Start a first worker now (loading the agent tells whether it loads), kept in the pool."""
    worker = pool.spawn()
    try:
        worker.start_sync()
    except BaseException:
        pool.discard(worker)
        raise
    pool.keep(worker)
    return worker
