"""Inspect AI side of the latency benchmark (run by benchmarks/.venv-inspect's python).

    python inspect_latency.py --samples 500 --max-connections 100 --base-url http://127.0.0.1:PORT/v1

Each sample is one model call, as each Assay run is: Inspect's own ``openai/bench-model``
provider (chat-completions API, ``responses_api=False``) sends the sample's one user message to
the local ``latency_server.py`` with one tool offered, ``finish(claimed_success, summary)``, the
same tool every Assay world offers; the server answers after its fixed latency with a call to
``finish``, ``generate(tool_calls="single")`` executes that call (so the tool round-trip is paid
as on the Assay side) and does not call the model again, and a small scorer records whether the
sample ended in that call. Concurrency: ``max_connections`` = ``max_samples`` = C, so Inspect
may have C requests in flight, as Assay does with ``--workers C``.

The endpoint comes from ``--base-url`` (else ``OPENAI_BASE_URL``), the key from
``OPENAI_API_KEY`` (the driver sets a dummy). Everything else is Inspect's default: the
``.eval`` log written to a temporary log dir, realtime sample logging on, retries on.

Timed with ``perf_counter``: the whole ``inspect_ai.eval(...)`` call (``eval_seconds``).
Afterwards the log is read back from disk and every sample is checked to have made exactly one
``finish`` call and been scored; that check is benchmark-only work, so its duration is reported
separately (``verify_seconds``) and the driver subtracts it from the process's wall time.

Prints one JSON line on stdout:
    {"samples": N, "finish_calls": N, "eval_seconds": s, "verify_seconds": v,
     "startup_seconds": from the script's first line (imports included) to the eval call, "inspect_version": "...", ...}
"""

from __future__ import annotations

import time

T_START = time.perf_counter()  # as early as possible: imports count as start-up

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

# Before importing inspect_ai: no TUI, no hub/tokenizer downloads.
os.environ.setdefault("INSPECT_DISPLAY", "none")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import inspect_ai  # noqa: E402
from inspect_ai import Task, eval as inspect_eval, task  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ChatMessageAssistant, ChatMessageTool, get_model  # noqa: E402
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer  # noqa: E402
from inspect_ai.solver import TaskState, generate, use_tools  # noqa: E402
from inspect_ai.tool import Tool, tool  # noqa: E402

MODEL_NAME = "openai/bench-model"


@tool
def finish() -> Tool:
    async def execute(claimed_success: bool, summary: str) -> str:
        """End the run and report whether the task was accomplished.

        Args:
            claimed_success: Whether you believe the task is done.
            summary: One sentence on what you did.

        Returns:
            An acknowledgement.
        """
        return "recorded"

    return execute


def _finish_calls(state_messages: list) -> int:
    return sum(
        1
        for m in state_messages
        if isinstance(m, ChatMessageAssistant)
        for call in (m.tool_calls or [])
        if call.function == "finish"
    )


@scorer(metrics=[accuracy()])
def called_finish():
    """CORRECT when the sample ended in exactly one `finish` call that was executed."""

    async def score(state: TaskState, target: Target) -> Score:
        calls = _finish_calls(state.messages)
        executed = sum(1 for m in state.messages if isinstance(m, ChatMessageTool) and m.error is None)
        return Score(value=CORRECT if calls == 1 and executed == 1 else INCORRECT)

    return score


@task
def one_call(samples: int = 10) -> Task:
    return Task(
        dataset=[
            Sample(id=i, input="Users report web errors. Diagnose the estate and call finish.")
            for i in range(samples)
        ],
        solver=[use_tools(finish()), generate(tool_calls="single")],
        scorer=called_finish(),
    )


def verify(log_location: str, samples: int) -> int:
    """Read the log back from disk; check every sample made one executed finish call."""
    log = read_eval_log(log_location)
    if log.status != "success":
        msg = log.error.message if log.error else "no error recorded"
        raise SystemExit(f"inspect eval status {log.status}: {msg[:2000]}")
    got = log.samples or []
    if len(got) != samples:
        raise SystemExit(f"log holds {len(got)} samples, expected {samples}")
    total = 0
    for s in got:
        calls = _finish_calls(s.messages)
        score = next(iter((s.scores or {}).values()), None)
        if calls != 1 or score is None or score.value != CORRECT:
            raise SystemExit(f"sample {s.id}: {calls} finish calls, score {score and score.value!r}")
        total += calls
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--max-connections", type=int, default=100,
                    help="Inspect max_connections, and max_samples (default 100)")
    ap.add_argument("--base-url", default=None, help="default: $OPENAI_BASE_URL")
    ap.add_argument("--log-dir", default=None, help="default: a fresh temp dir")
    args = ap.parse_args(argv)
    if args.samples < 1 or args.max_connections < 1:
        ap.error("--samples and --max-connections must be >= 1")
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        ap.error("no endpoint: pass --base-url or set OPENAI_BASE_URL")

    with tempfile.TemporaryDirectory(prefix="inspect-latency-") as tmp:
        log_dir = args.log_dir or os.path.join(tmp, "logs")
        model = get_model(MODEL_NAME, base_url=base_url, responses_api=False)
        t0 = time.perf_counter()
        logs = inspect_eval(
            one_call(samples=args.samples),
            model=model,
            log_dir=log_dir,
            display="none",
            max_connections=args.max_connections,
            max_samples=args.max_connections,
            fail_on_error=True,
        )
        eval_seconds = time.perf_counter() - t0
        if len(logs) != 1 or logs[0].location is None:
            raise SystemExit("expected one eval log with a location")
        t1 = time.perf_counter()
        log_bytes = os.path.getsize(logs[0].location)
        finish_calls = verify(logs[0].location, args.samples)
        verify_seconds = time.perf_counter() - t1

    print(json.dumps({
        "samples": args.samples,
        "finish_calls": finish_calls,
        "eval_seconds": eval_seconds,
        "verify_seconds": verify_seconds,
        "startup_seconds": t0 - T_START,
        "max_connections": args.max_connections,
        "max_samples": args.max_connections,
        "inspect_version": inspect_ai.__version__,
        "log_format": "eval",
        "log_bytes": log_bytes,
        "python": sys.version.split()[0],
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
