"""`assay ARGS` in this process: `assay.cli.main` with the arguments, the environment and working
directory given, its output captured, as the console script runs it (same exit codes, refusals and
output) without an interpreter and the package's imports per call."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def run_main(argv: list[str], *, cwd: Path, env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """`(exit code, stdout, stderr)` of `assay *argv`; `env`, when given, replaces the environment
    for the call (`main` closes every store it opened)."""
    from assay.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    saved = (sys.argv, os.getcwd(), dict(os.environ), signal.getsignal(signal.SIGTERM))
    sys.argv = ["assay", *argv]
    os.chdir(cwd)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    code: Any = 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                main()
            except SystemExit as exc:
                code = exc.code
    finally:
        sys.argv = saved[0]
        os.chdir(saved[1])
        os.environ.clear()
        os.environ.update(saved[2])
        signal.signal(signal.SIGTERM, saved[3])
    code = code if isinstance(code, int) else (0 if code is None else 1)
    return code, stdout.getvalue(), stderr.getvalue()
