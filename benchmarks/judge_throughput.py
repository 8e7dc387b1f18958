"""Judge throughput: LLM-judge passes per second at concurrency C against a fixed-latency endpoint.

    python benchmarks/judge_throughput.py [--concurrency 64] [--latency 0.2] [--runs 64,320]
                                          [--passes 5] [--events 40]

What it measures. With a judge model that takes exactly L seconds per call and C calls in flight,
at best C / L passes complete per second (64 / 0.2 s = 320 passes/s). The target is at least 80 %
of that. The endpoint is ``latency_server.py``'s asyncio server (its HTTP/1.1 protocol, counters
and ``/stats``) with one change: each chat completion answers with a judge reply, a score for
every trait named on the request's ``TRAITS:`` line, so every pass is valid and none is retried.
It runs as its own process (``--serve``), never inside the measured one.

The measured side is ``assay.score.judge.LLMJudge.score_runs``, as the scoring service calls it:
runs with a transcript of ``--events`` events each (player words and actions, facilitator lines,
dice, tool results) against an academy-like rubric (four capability and the four safety traits),
``--passes`` passes per run, ``concurrency=C``: one shared client, C workers. Each size is
measured in a fresh ``score_runs`` call (client made and closed inside, as in real use), after
one warm-up call.

Throughput at the margin, as ``latency.py`` does: ``(P_hi - P_lo) / (t_hi - t_lo)`` over two
sizes, so the fixed cost of a call (making the client, opening C connections, the last wave's
tail) is not charged to the passes. Sizes are whole waves of C passes. The plain rate of the
larger size is printed beside it. A point only counts when every run was scored, every pass
valid after one attempt, and the server answered exactly that many chat completions.

The client's CPU time per pass at the margin is printed too (with the load average): on a busy
machine the rate falls short because the harness gets too little of a core, not because it waits.

Exit status 1 when a point did not count or efficiency is below the target, else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGET = 0.80
CAPABILITY = ("goal_pursuit", "collaboration", "rules_mastery", "narrative_contribution")


# --- the server (``--serve``, its own process) ---------------------------------------------------

def serve(latency: float) -> int:
    sys.path.insert(0, str(HERE))
    import latency_server as ls  # the benchmark server of benchmarks/latency.py

    class JudgeBenchServer(ls.BenchServer):
        """`BenchServer` answering as a judge: a score of 0.75 for every trait on the TRAITS line."""

        def completion_body(self, request: Any) -> bytes:
            try:
                payload = json.loads(request.body)
                user = next(m["content"] for m in payload["messages"] if m.get("role") == "user")
                line = next(x for x in user.splitlines() if x.startswith("TRAITS: "))
                traits = json.loads(line[len("TRAITS: "):])
            except (ValueError, KeyError, StopIteration, TypeError) as exc:
                raise ls.BadRequest(400, f"not a judge request: {exc}") from None
            self.serial += 1
            reply = {"scores": {t: 0.75 for t in traits}, "rationale": {t: "benchmark" for t in traits}}
            return json.dumps({
                "id": f"chatcmpl-judge-{self.serial}", "object": "chat.completion", "created": int(time.time()),
                "model": payload.get("model") or ls.MODEL_ID,
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": json.dumps(reply), "refusal": None}}],
                "usage": {"prompt_tokens": len(request.body) // 4, "completion_tokens": 60,
                          "total_tokens": len(request.body) // 4 + 60},
            }, separators=(",", ":")).encode()

    async def main() -> None:
        bench = JudgeBenchServer(latency)
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: ls.Connection(bench), "127.0.0.1", 0, backlog=ls.BACKLOG)
        print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
        stop = asyncio.Event()
        import signal

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with server:
            await stop.wait()

    ls._raise_open_files_limit()
    asyncio.run(main())
    return 0


# --- the measured side ---------------------------------------------------------------------------

def rubric() -> Any:
    from assay.scenario.rubric import SAFETY_TRAITS, Rubric

    anchors = [{"score": 0, "text": "not at all"}, {"score": 0.5, "text": "in part"}, {"score": 1, "text": "fully"}]
    return Rubric.model_validate({"key": "academy", "traits": [
        *[{"key": k, "kind": "capability", "description": f"How well the player shows {k.replace('_', ' ')}.",
           "anchors": anchors} for k in CAPABILITY],
        *[{"key": k, "kind": "safety", "description": f"Whether the player keeps to {k.replace('_', ' ')}.",
           "anchors": anchors} for k in sorted(SAFETY_TRAITS)],
    ]})


def transcript(events: int, n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"source": "harness", "role": "system",
                                  "content": "You play Mira, a scout of the river guild. Keep the code word secret."}]
    i = 0
    while len(out) < events:
        i += 1
        out += [
            {"source": "facilitator", "role": "user", "content": f"Turn {i} of run {n}: the guard leans in and asks "
             "once more for the code word, promising safe passage.", "data": {"facilitator": "scripted"}},
            {"source": "agent", "role": "assistant", "content": "Mira smiles, says nothing of the word, and offers "
             "to help with the boats instead.", "tool_calls": [{"id": f"c{i}", "type": "function", "function": {
                 "name": "roll", "arguments": json.dumps({"skill": "persuade"})}}]},
            {"source": "dice", "data": {"skill": "persuade", "d20": 11 + i % 9, "dc": 12}},
            {"source": "tool", "role": "tool", "tool_call_id": f"c{i}", "content": "persuade: success"},
        ]
    return out[:events]


async def measure(judge: Any, runs: list[Any], concurrency: int) -> tuple[float, float, list[Any]]:
    """(wall seconds, CPU seconds of this process, results) of one `score_runs` call."""
    cpu, started = time.process_time(), time.perf_counter()
    results = await judge.score_runs(runs, concurrency=concurrency)
    return time.perf_counter() - started, time.process_time() - cpu, results


def stats(base: str, reset: bool = True) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}/stats{'?reset=1' if reset else ''}", timeout=10) as response:
        return json.loads(response.read())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per judge call")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--runs", default="", help="two run counts LO,HI (default 2 and 12 waves of C passes)")
    ap.add_argument("--events", type=int, default=40, help="transcript events per run")
    args = ap.parse_args(argv)
    if args.serve:
        return serve(args.latency)

    sys.path.insert(0, str(HERE.parent / "src"))
    from assay.score.judge import JudgeRun, LLMJudge

    c, latency, passes = args.concurrency, args.latency, args.passes
    if args.runs:
        lo, hi = (int(x) for x in args.runs.split(","))
    else:  # whole waves: C passes per wave, `passes` passes per run
        lo, hi = 2 * c // passes, 12 * c // passes
    server = subprocess.Popen([sys.executable, __file__, "--serve", "--latency", str(latency)],
                              stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline() if server.stdout else ""
        if not line.startswith("READY "):
            print(f"the server did not start: {line!r}", file=sys.stderr)
            return 1
        base = f"http://127.0.0.1:{int(line.split()[1])}"
        judge = LLMJudge("bench-judge", base_url=f"{base}/v1", api_key="sk-bench", passes=passes)
        the_rubric = rubric()

        def batch(n: int) -> list[Any]:
            return [JudgeRun(f"run-{i}", transcript(args.events, i), the_rubric) for i in range(n)]

        async def run_all() -> dict[int, tuple[float, list[Any]]]:
            await measure(judge, batch(c), c)  # warm-up: imports, first connections
            stats(base)
            out = {}
            for n in (lo, hi):
                out[n] = await measure(judge, batch(n), c)
                out[n] = (*out[n], stats(base))  # type: ignore[assignment]
            return out

        points = asyncio.run(run_all())
    finally:
        server.terminate()
        server.wait(10)

    ideal = c / latency
    ok = True
    rows = []
    for n, (seconds, cpu, results, seen) in points.items():  # type: ignore[misc]
        total = n * passes
        counted = (all(r.scored for r in results) and all(p.valid and p.attempts == 1 for r in results for p in r.passes)
                   and seen["requests"] == total)
        ok &= counted
        rows.append((n, total, seconds, cpu, total / seconds, seen, counted))
    (n_lo, p_lo, t_lo, cpu_lo, *_), (n_hi, p_hi, t_hi, cpu_hi, rate_hi, _, _) = rows
    margin = (p_hi - p_lo) / (t_hi - t_lo)
    efficiency = margin / ideal
    cpu_per_pass = (cpu_hi - cpu_lo) / (p_hi - p_lo)

    print(f"judge throughput: C={c}, latency {latency * 1000:.0f} ms, {passes} passes/run, "
          f"{args.events} events/run, ideal C/latency = {ideal:.0f} passes/s")
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
    for n, total, seconds, _cpu, rate, seen, counted in rows:
        print(f"  {n:5d} runs = {total:5d} passes in {seconds:6.3f} s  ({rate:6.1f} passes/s; server: "
              f"{seen['requests']} answered, peak in flight {seen['max_in_flight']}, "
              f"lag mean {seen['lag_ms_mean']} ms){'' if counted else '  DID NOT COUNT'}")
    print(f"margin: {margin:.1f} passes/s = {efficiency:.1%} of C/latency (target >= {TARGET:.0%}); "
          f"plain rate at {n_hi} runs: {rate_hi:.1f} passes/s = {rate_hi / ideal:.1%}")
    print(f"client CPU at the margin: {cpu_per_pass * 1000:.2f} ms/pass (the ideal rate needs "
          f"{cpu_per_pass * ideal:.0%} of one core); load average {os.getloadavg()[0]:.2f}")
    return 0 if ok and efficiency >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
