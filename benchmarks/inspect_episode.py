"""Inspect AI side of the throughput benchmark (run by benchmarks/.venv-inspect's python).

Each sample is one IT-ops episode: the scripted ``mockllm/model`` makes exactly
10 tool calls against four small ``@tool`` tools, then gives a final text
answer; Inspect's standard tool loop (``use_tools`` + ``generate(tool_calls="loop")``)
executes every call, and a trivial ``includes()`` scorer grades the answer. The
whole ``inspect_ai.eval(...)`` call, logging included (default ``.eval`` format
to a temporary log dir), is timed with ``perf_counter``. Afterwards, outside the
timed region, the log is read back from disk and every sample is checked to have
made exactly 10 successful tool calls and been scored.

Prints one JSON line on stdout:
    {"samples": N, "tool_calls": total, "seconds": s, "rate": samples_per_second,
     "inspect_version": "...", ...}

Concurrency: ``--max-samples`` defaults to 1, i.e. samples run one after
another, as Assay's side runs with workers=1; both sides are then one process on
one core. With a mock model nothing waits on I/O, so Inspect's own default
(max_samples = max_connections = 10) only adds scheduling overhead: measured on
the 2-core bench machine it was ~10% slower at 200 samples (14.4-14.5/s vs
15.8-16.1/s), so 1 is also the setting that flatters Inspect. Pass
``--max-samples 0`` to use Inspect's default instead; the JSON records which.

Offline: the mock model would count tokens with tiktoken (which downloads its
encoding) whenever an output has no ``usage``; every scripted ``ModelOutput``
therefore carries ``usage=ModelUsage(...)``. Hub-offline variables are set too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

# Before importing inspect_ai: no TUI, no hub/tokenizer downloads.
os.environ.setdefault("INSPECT_DISPLAY", "none")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import inspect_ai  # noqa: E402
from inspect_ai import Task, eval as inspect_eval, task  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import (  # noqa: E402
    ChatMessage,
    ChatMessageTool,
    GenerateConfig,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.scorer import includes  # noqa: E402
from inspect_ai.solver import generate, use_tools  # noqa: E402
from inspect_ai.tool import Tool, ToolChoice, ToolInfo, tool  # noqa: E402
from inspect_ai.util import store  # noqa: E402

TOOL_CALLS_PER_EPISODE = 10
MODEL_NAME = "mockllm/model"

# --- a tiny IT-ops world ---------------------------------------------------

HOSTS = {
    "web-1": {"nginx": "running"},
    "web-2": {"nginx": "running"},
    "db-1": {"postgres": "stopped"},
}
LOGS = {
    "web-1": "12:00:01 nginx upstream db-1:5432 connection refused",
    "web-2": "12:00:02 nginx ok",
    "db-1": "11:59:58 postgres shutting down: out of disk",
}


@tool
def list_hosts() -> Tool:
    async def execute() -> str:
        """List the hosts in the estate.

        Returns:
            Comma-separated host names.
        """
        return ", ".join(HOSTS)

    return execute


@tool
def read_log() -> Tool:
    async def execute(host: str) -> str:
        """Read the last line of a host's system log.

        Args:
            host: Host name.

        Returns:
            The log line.
        """
        return LOGS.get(host, f"no such host: {host}")

    return execute


@tool
def check_service() -> Tool:
    async def execute(host: str, service: str) -> str:
        """Report whether a service is running on a host.

        Args:
            host: Host name.
            service: Service name.

        Returns:
            The service status.
        """
        status = store().get(f"svc:{service}@{host}") or HOSTS.get(host, {}).get(
            service, "unknown"
        )
        return f"{service}@{host}: {status}"

    return execute


@tool
def restart_service() -> Tool:
    async def execute(host: str, service: str) -> str:
        """Restart a service on a host.

        Args:
            host: Host name.
            service: Service name.

        Returns:
            What happened.
        """
        # Per-sample world state lives in the sample's Store; the module-level
        # tables are the read-only initial state every sample starts from.
        if service not in HOSTS.get(host, {}):
            return f"{service}@{host}: no such service"
        store().set(f"svc:{service}@{host}", "running")
        return f"{service}@{host}: restarted"

    return execute


# The 10 scripted tool calls of one episode, then the final answer.
SCRIPT: list[tuple[str, dict[str, str]]] = [
    ("list_hosts", {}),
    ("check_service", {"host": "web-1", "service": "nginx"}),
    ("read_log", {"host": "web-1"}),
    ("check_service", {"host": "web-2", "service": "nginx"}),
    ("read_log", {"host": "web-2"}),
    ("check_service", {"host": "db-1", "service": "postgres"}),
    ("read_log", {"host": "db-1"}),
    ("restart_service", {"host": "db-1", "service": "postgres"}),
    ("check_service", {"host": "db-1", "service": "postgres"}),
    ("read_log", {"host": "web-1"}),
]
assert len(SCRIPT) == TOOL_CALLS_PER_EPISODE
FINAL_ANSWER = "Root cause: postgres on db-1 stopped (out of disk); restarted it."


def _usage(output: ModelOutput, input_tokens: int) -> ModelOutput:
    out_tokens = 16
    output.usage = ModelUsage(
        input_tokens=input_tokens,
        output_tokens=out_tokens,
        total_tokens=input_tokens + out_tokens,
    )
    return output


def scripted_model(
    input: list[ChatMessage],
    tools: list[ToolInfo],
    tool_choice: ToolChoice,
    config: GenerateConfig,
) -> ModelOutput:
    """custom_outputs callable: the step is the number of tool results so far.

    A callable (rather than a flat list of N*11 outputs) keeps each sample's
    episode intact when Inspect runs samples concurrently, since the mock
    model instance, and hence a flat iterator, is shared by all samples.
    """
    step = sum(1 for m in input if isinstance(m, ChatMessageTool))
    input_tokens = 50 + 20 * len(input)  # cheap, plausible, no tokenizer
    if step < TOOL_CALLS_PER_EPISODE:
        name, args = SCRIPT[step]
        out = ModelOutput.for_tool_call(
            model="model",
            tool_name=name,
            tool_arguments=dict(args),
            tool_call_id=f"call_{step}",
        )
    else:
        out = ModelOutput.from_content(model="model", content=FINAL_ANSWER)
    return _usage(out, input_tokens)


@task
def it_ops(samples: int = 10) -> Task:
    return Task(
        dataset=[
            Sample(
                id=i,
                input="Users report web errors. Diagnose the estate and fix the cause.",
                target="db-1",
            )
            for i in range(samples)
        ],
        solver=[
            use_tools(list_hosts(), read_log(), check_service(), restart_service()),
            generate(tool_calls="loop"),
        ],
        scorer=includes(),
    )


def verify(log_location: str, samples: int) -> int:
    """Read the log back from disk; check every sample made exactly 10 tool calls."""
    log = read_eval_log(log_location)
    if log.status != "success":
        msg = log.error.message if log.error else "no error recorded"
        raise SystemExit(f"inspect eval status {log.status}: {msg[:2000]}")
    got = log.samples or []
    if len(got) != samples:
        raise SystemExit(f"log holds {len(got)} samples, expected {samples}")
    total = 0
    for s in got:
        tool_msgs = [m for m in s.messages if isinstance(m, ChatMessageTool)]
        errors = [m for m in tool_msgs if m.error is not None]
        if len(tool_msgs) != TOOL_CALLS_PER_EPISODE or errors:
            raise SystemExit(
                f"sample {s.id}: {len(tool_msgs)} tool calls, {len(errors)} errors "
                f"(expected {TOOL_CALLS_PER_EPISODE}, 0)"
            )
        if not s.scores or s.output.completion != FINAL_ANSWER:
            raise SystemExit(f"sample {s.id}: not scored or wrong final answer")
        total += len(tool_msgs)
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("samples", nargs="?", type=int, help="number of samples (episodes)")
    ap.add_argument("--samples", dest="samples_flag", type=int, default=None)
    ap.add_argument(
        "--max-samples",
        type=int,
        default=1,
        help="Inspect max_samples (default 1: sequential, like Assay workers=1; "
        "0 = Inspect's own default, 10 here)",
    )
    ap.add_argument("--log-dir", default=None, help="default: a fresh temp dir")
    args = ap.parse_args(argv)
    n = args.samples_flag if args.samples_flag is not None else args.samples
    if n is None:
        n = 200
    if n < 1:
        ap.error("samples must be >= 1")

    with tempfile.TemporaryDirectory(prefix="inspect-bench-") as tmp:
        log_dir = args.log_dir or os.path.join(tmp, "logs")
        model = get_model(MODEL_NAME, custom_outputs=scripted_model)
        t0 = time.perf_counter()
        logs = inspect_eval(
            it_ops(samples=n),
            model=model,
            log_dir=log_dir,
            display="none",
            max_samples=args.max_samples or None,
            fail_on_error=True,
        )
        seconds = time.perf_counter() - t0
        if len(logs) != 1 or logs[0].location is None:
            raise SystemExit("expected one eval log with a location")
        log_bytes = os.path.getsize(logs[0].location)
        tool_calls = verify(logs[0].location, n)

    result = {
        "samples": n,
        "tool_calls": tool_calls,
        "seconds": seconds,
        "rate": n / seconds,
        "inspect_version": inspect_ai.__version__,
        "max_samples": args.max_samples or "inspect-default",
        "log_format": "eval",
        "log_bytes": log_bytes,
        "python": sys.version.split()[0],
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
