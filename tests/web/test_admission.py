"""Reads paced while remote play is in flight (issue 26): `edge.Admission` lets agents' steps have
the process, on an injected clock and sleep (nothing waits for real)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from assay.web.edge import PLAY_WINDOW_SECONDS, Admission


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))  # a paced read waits; the clock stays put (requests overlap)


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _call(gate: Admission, path: str, method: str = "GET") -> int:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    anyio.run(gate, {"type": "http", "path": path, "method": method, "headers": []}, receive, send)
    return int(sent[0]["status"])


def _gate(clock: Clock, rate: float = 100.0, cap: int = 128) -> Admission:
    return Admission(_ok, cap=cap, reads_while_playing=rate, clock=clock, sleep=clock.sleep)


def test_reads_are_unpaced_until_play_runs_then_paced_to_the_rate_then_free_again() -> None:
    clock = Clock()
    gate = _gate(clock, rate=100.0)
    for _ in range(3):
        assert _call(gate, "/suites/forge") == 200
    assert clock.slept == []  # nobody plays: reads go at once

    assert _call(gate, "/api/agent/runs/next", "POST") == 200  # a lease: play is in flight
    for _ in range(4):
        assert _call(gate, "/api/leaderboard/forge") == 200
    # four reads at the same instant: the first goes, the next wait 10, 20, 30 ms (100 a second)
    assert clock.slept == [0.01, 0.02, 0.03]
    assert _call(gate, "/api/agent/runs/x/step", "POST") == 200 and clock.slept == [0.01, 0.02, 0.03]  # play never waits

    clock.slept.clear()
    clock.now += PLAY_WINDOW_SECONDS  # no play request for the window: reads are free again
    for _ in range(3):
        assert _call(gate, "/suites/forge") == 200
    assert clock.slept == []


def test_writes_are_not_paced_and_a_zero_rate_paces_nothing() -> None:
    clock = Clock()
    gate = _gate(clock, rate=100.0)
    _call(gate, "/api/agent/runs/next", "POST")
    for _ in range(3):
        assert _call(gate, "/api/submissions", "POST") == 200
    assert clock.slept == []
    unpaced = _gate(clock, rate=0.0)
    _call(unpaced, "/api/agent/runs/next", "POST")
    for _ in range(3):
        assert _call(unpaced, "/suites/forge") == 200
    assert clock.slept == []


@pytest.mark.parametrize("rate", [1.0, 7.5, 200.0])
def test_paced_reads_keep_to_the_rate_whatever_it_is(rate: float) -> None:
    clock = Clock()
    gate = _gate(clock, rate=rate)
    _call(gate, "/api/agent/runs/next", "POST")
    for _ in range(5):
        _call(gate, "/suites/forge")
    assert clock.slept == [round(i / rate, 6) for i in range(1, 5)]
