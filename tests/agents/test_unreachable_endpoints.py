"""Model endpoints that cannot be reached fail within a bounded time, in one line naming the
endpoint and the cause (issue 23, item 4): the `openai:` agent, the model judge and the model
facilitator. A refusal is real (a port bound and closed); a connect that hangs is a listener that
never accepts, with the connect timeout injected short (a blackhole is hard on loopback otherwise)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import pytest

import assay
from assay.agents.loader import load_agent
from assay.agents.openai_agent import OpenAIAgent
from assay.agents.protocol import Unreachable, unreachable_reason
from assay.endpoints import CONNECT_TIMEOUT, connect_failure
from assay.records import PlannedRun
from assay.run.drivers import play_sync
from assay.run.engine import Limits, open_episode
from assay.scenario.load import load_scenario
from assay.score.judge import JudgeRun, LLMJudge, RetryPolicy
from assay.worlds.campaign.model_facilitator import FacilitatorSpec
from assay.worlds.kits import get_kit
from tests.support.unreachable import blackhole, closed_port

MESSAGES = [{"role": "user", "content": "hello"}]
TOOLS: list[dict[str, object]] = []


def test_the_connect_timeout_is_a_few_seconds_and_apart_from_the_read_timeout() -> None:
    agent = OpenAIAgent("m", base_url="http://127.0.0.1:9/v1", timeout=60.0)

    async def client_timeout() -> object:
        return agent.endpoint.client().timeout

    timeout = asyncio.run(client_timeout())
    assert CONNECT_TIMEOUT == 5.0 and timeout.connect == 5.0 and timeout.read == 60.0  # type: ignore[attr-defined]
    assert LLMJudge("j", base_url="http://127.0.0.1:9/v1").client(1).timeout.connect == 5.0


def test_an_agent_endpoint_that_hangs_is_given_up_after_its_connect_timeout() -> None:
    with blackhole() as url:
        agent = OpenAIAgent("m", base_url=url + "/v1", max_retries=0, timeout=30.0)
        agent.endpoint.connect_timeout = 0.3
        began = time.monotonic()
        with pytest.raises(Unreachable) as caught:
            asyncio.run(agent(MESSAGES, TOOLS))
        assert time.monotonic() - began < 2
    assert str(caught.value) == f"agent endpoint {url}/v1 unreachable: connect timed out"
    assert unreachable_reason(str(caught.value))


def test_a_judge_endpoint_that_hangs_is_given_up_after_its_connect_timeouts() -> None:
    rubric_doc = {"key": "rubric", "traits": [{"key": "trait", "kind": "capability", "description": "d", "anchors": [
        {"score": 0, "text": "no"}, {"score": 1, "text": "yes"}]}]}
    from assay.scenario.rubric import Rubric

    run = JudgeRun("run-0", [{"role": "assistant", "content": "hi", "source": "agent"}], Rubric.model_validate(rubric_doc))
    with blackhole() as url:
        judge = LLMJudge("j", base_url=url + "/v1", connect_timeout=0.2,
                         retry=RetryPolicy(connect_retries=1, connect_backoff=0.01))
        began = time.monotonic()
        [result] = judge.score_runs_sync([run], concurrency=1)
        assert time.monotonic() - began < 2.5  # 2 tries of one pass, then no further pass
    assert judge.unreachable == f"judge endpoint {url}/v1 unreachable: connect timed out"
    assert len(result.passes) == 1 and not result.scored


def test_a_facilitator_endpoint_that_refuses_ends_the_run_as_an_error_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url = f"http://127.0.0.1:{closed_port()}/v1"
    loaded = load_scenario(Path(assay.__file__).resolve().parent / "suites" / "academy" / "sealed-letter.yaml",
                           get_kit)
    modelled = dataclasses.replace(loaded, world_options={"facilitator": FacilitatorSpec("openai:gm", base_url=url)})
    planned = PlannedRun("run-gm-down", 0, loaded.id, loaded.content_hash, 1, 11)
    began = time.monotonic()
    record = play_sync(open_episode(modelled, planned, Limits()), load_agent("reference:steadfast"))
    assert time.monotonic() - began < 10
    assert record.status == "error"
    assert record.reason is not None and f"facilitator endpoint {url} unreachable: connection refused" in record.reason


def test_the_cause_is_read_off_the_whole_chain() -> None:
    def chained(*errors: BaseException) -> BaseException:
        for outer, inner in zip(errors, errors[1:]):
            outer.__cause__ = inner
        return errors[0]

    class ConnectTimeout(Exception):
        pass

    class gaierror(OSError):  # noqa: N801 - the name `socket` gives it
        pass

    assert connect_failure(chained(TimeoutError("x"), ConnectTimeout("y"), ConnectionRefusedError(111, "r"))) == \
        "connection refused"
    assert connect_failure(chained(RuntimeError("x"), gaierror(-2, "Name or service not known"))) == "name not resolved"
    assert connect_failure(chained(RuntimeError("x"), ConnectTimeout("t"))) == "connect timed out"
    assert connect_failure(ValueError("not a connection")) is None
