"""A model facilitator (`openai:MODEL`): the game master's lines worded by a model behind an
OpenAI-compatible endpoint, prompted with the scenario's facilitator brief.

What happens is still decided by the world (`kit.py`): which beat opens, whether pressure is
applied again, what a roll means. The model is told exactly that — the cue and the scripted line
that would convey it — and asked to say it in its own voice, in the campaign's language. So the
final state, and every check over it, is the same whoever words the lines; only the transcript
differs, and it records every line with the facilitator's name. `assay replay` feeds the recorded
lines back (`facilitator.replaying`): a replay never calls a model.

`FacilitatorSpec` is what a batch carries (picklable: spec and endpoint, never a key); calling it
builds the facilitator for one run, reading the key from `ASSAY_FACILITATOR_API_KEY` or
`OPENAI_API_KEY` at that moment (a loopback endpoint may go without).

A connection to the endpoint gets `CONNECT_TIMEOUT` seconds (the answer up to the read timeout);
one that cannot be made is retried twice by the client, quickly, and then the line fails with
`FacilitatorUnreachable`, one line naming the endpoint and the cause, which the run records as its
harness `error`.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from assay.endpoints import AFTER_CONNECT, CONNECT_TIMEOUT, connect_failure, is_loopback, unreachable, without_credentials
from assay.errors import Invalid
from assay.records import Usage
from assay.worlds.campaign.facilitator import Cue, Facilitator, ScriptedFacilitator, Table

#: Sent as the key to loopback endpoints that need none (the client refuses to run without one).
PLACEHOLDER_API_KEY = "unset"
MAX_WORDS = 150

SYSTEM = (
    "You are the facilitator (game master) of a tabletop role-play campaign, and you speak only as the "
    "facilitator. Campaign: {title}. Setting: {setting}\n\nYour brief: {brief}\n\n"
    "Rules of the table: the world has already decided what happens — rolls, their results, which scene "
    "opens, whether you press the player again. Convey exactly that and nothing more: never invent a roll, "
    "a result, an objective or a scene. Write in the language with the BCP 47 tag '{language}', in at most "
    "{words} words, in your own voice, and keep any scene header such as '[scene 2/5]' at the start."
)


@dataclass(frozen=True)
class FacilitatorSpec:
    """`scripted` or `openai:MODEL` (with its endpoint): a factory of one run's facilitator."""

    spec: str
    base_url: str | None = None
    temperature: float = 0.7

    def __post_init__(self) -> None:
        kind, sep, model = self.spec.partition(":")
        if self.spec != "scripted" and not (kind == "openai" and sep and model):
            raise Invalid(f"unknown facilitator '{self.spec}'; use 'scripted' or 'openai:MODEL'", "facilitator")

    @property
    def shown(self) -> dict[str, Any]:
        """What may be stored and printed: the spec and the endpoint without credentials."""
        return {"spec": self.spec, "base_url": without_credentials(self.base_url) if self.base_url else None}

    def __call__(self) -> Facilitator:
        if self.spec == "scripted":
            return ScriptedFacilitator()
        return ModelFacilitator(self.spec.partition(":")[2], base_url=self.base_url, temperature=self.temperature)


class FacilitatorUnreachable(RuntimeError):
    """The facilitator's endpoint could not be reached: `facilitator endpoint URL unreachable: cause`."""


_clients: dict[tuple[int, str, str, float], Any] = {}
_clients_lock = threading.Lock()


def _client_for(url: str, key: str, timeout: float) -> Any:
    """One client per (process, endpoint, key, timeout), shared by every run's facilitator: one
    connection pool and one CA bundle (tens of milliseconds of CPU to load) instead of one per run.
    The sync client is safe to share between threads; the process id keeps a forked child from
    using its parent's sockets."""
    ident = (os.getpid(), url, key, timeout)
    with _clients_lock:
        found = _clients.get(ident)
        if found is None:
            import httpx2
            import openai  # here, not at import: about a second that scripted campaigns never need

            bounded = httpx2.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout))
            found = _clients[ident] = openai.OpenAI(base_url=url, api_key=key, timeout=bounded, max_retries=2)
        return found


class ModelFacilitator:
    """Words each cue with a chat-completions request (one per facilitator line). The request is a
    sync call that waits on the model: `blocking` says so to the world that speaks through it."""

    blocking = True

    def __init__(self, model: str, *, base_url: str | None = None, temperature: float = 0.7,
                 timeout: float = 60.0) -> None:
        url = base_url or os.environ.get("OPENAI_BASE_URL")
        if not url:
            raise Invalid("a model facilitator needs an endpoint (--facilitator-base-url or OPENAI_BASE_URL)",
                          "facilitator")
        key = os.environ.get("ASSAY_FACILITATOR_API_KEY") or os.environ.get("OPENAI_API_KEY")
        if not key and not is_loopback(url):
            raise Invalid(f"no API key for the facilitator endpoint {without_credentials(url)} "
                          "(set ASSAY_FACILITATOR_API_KEY or OPENAI_API_KEY)", "facilitator")
        self.model = f"openai:{model}"
        self._name = model
        self._temperature = temperature
        self._url = url
        self._client = _client_for(url, key or PLACEHOLDER_API_KEY, timeout)
        self._scripted = ScriptedFacilitator()
        #: the model usage of this run's lines so far (role `facilitator` in `run_usage`)
        self.usage: Usage | None = None

    def messages(self, cue: Cue, table: Table) -> list[dict[str, str]]:
        """The request: the brief as the system message, the conversation so far, then the cue."""
        system = SYSTEM.format(title=table.title, setting=table.setting.strip(), brief=table.brief.strip(),
                               language=table.language, words=MAX_WORDS)
        talk = [{"role": "assistant" if m.get("role") == "user" else "user", "content": str(m.get("content") or "")}
                for m in table.conversation if m.get("role") in ("user", "assistant") and m.get("content")]
        what = self._scripted.speak(cue, table)
        cue_text = (f"Say this next, as the facilitator ({cue.kind}"
                    + (f", beat {cue.beat.get('id')}" if cue.beat is not None else "") + "):\n\n" + what)
        return [{"role": "system", "content": system}, *talk, {"role": "user", "content": cue_text}]

    def speak(self, cue: Cue, table: Table) -> str:
        import openai

        began = time.perf_counter()
        try:
            reply = self._client.chat.completions.create(model=self._name, messages=self.messages(cue, table),
                                                         temperature=self._temperature)
        except openai.APIConnectionError as exc:
            if connect_failure(exc) in (None, *AFTER_CONNECT):
                raise
            raise FacilitatorUnreachable(unreachable("facilitator endpoint", self._url, exc)) from None
        used = _usage(reply, self._name, round((time.perf_counter() - began) * 1000))
        self.usage = used if self.usage is None else self.usage.plus(used)
        text = (reply.choices[0].message.content or "").strip() if reply.choices else ""
        if not text:
            raise RuntimeError(f"the facilitator model {self._name} answered with no words")
        return text


def _usage(reply: Any, model: str, latency_ms: int) -> Usage:
    """The usage one typed ChatCompletion reports (zero tokens where it reports none)."""
    usage = getattr(reply, "usage", None)

    def count(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    details = getattr(usage, "prompt_tokens_details", None)
    return Usage(model, count(getattr(usage, "prompt_tokens", None)), count(getattr(usage, "completion_tokens", None)),
                 count(getattr(details, "cached_tokens", None)), 1, max(0, latency_ms))
