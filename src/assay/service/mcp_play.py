"""Play a run over the Model Context Protocol (issue 28): one MCP session plays one run.

    play = LocalPlay.start(store, batch_id)          # `assay mcp`: a slot of a local batch, claimed
    play = RemotePlay.lease(store, actor)            # `/mcp` of `assay serve`: a remote run, leased
    server = mcp_server(lambda ctx: play)            # the official SDK's low-level server

The tools are the world's tools (their JSON schemas as the kit gives them to every agent) plus
`finish`; the briefing — the opening messages every agent is shown, the kit's system prompt and
the scenario's briefing — is the server's instructions and the resource `assay://briefing`. Each
tool call is one engine step: one assistant message with that one tool call, applied by the one
loop (`run.drivers.Stepper`) exactly as in-process play applies it, so an unknown tool or bad
arguments are a tool error, the turn and time budgets hold, and `finish` ends the run. Its answer
is what followed the step (the tool's result, a facilitator's words), and, once the run is over,
its status.

`LocalPlay` plays a slot of a stored run batch in this process: it claims the slot with a holder
that keeps a heartbeat (`store/claims.py`), so a killed server's slot is pending again; the run
ends recorded and oracle-scored by the same writer as `assay run` (`execution.RunWriter`), and the batch
completes with its last run. `RemotePlay` is the remote step API (`service.remote`) driven one
tool call a step: the same lease, the same recorded steps, the same expiry, the same release.
Nothing here shows an agent more than the step API does: never the hidden truth, checks or seed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from assay.agents.loader import AgentFactory
from assay.errors import Conflict
from assay.jsontypes import JsonObject
from assay.records import PlannedRun
from assay.run.drivers import Stepper
from assay.run.engine import Limits, open_episode
from assay.service.actors import Actor
from assay.store.repo import Store
from assay.store.runs_repo import RunsRepo

if TYPE_CHECKING:
    from assay.service.remote import LeaseView

#: The agent spec of a batch played over MCP (`assay mcp`); loaded by nobody here.
MCP_SPEC = "mcp"
#: Where the briefing is read as a resource.
BRIEFING_URI = "assay://briefing"


def mcp_factory() -> AgentFactory:
    """The agent of a batch an MCP client plays: stored as `mcp`; the server cannot vouch for
    what the client is, so its configuration signature says only that."""
    return AgentFactory(MCP_SPEC, _plays_elsewhere, {"kind": "mcp"}, portable_spec=MCP_SPEC)


def _plays_elsewhere() -> Any:
    raise RuntimeError("an MCP client plays this batch over `assay mcp`, never an agent loaded here")


class FunctionCall(TypedDict):
    name: str
    arguments: str


class ToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: FunctionCall


class ToolCallMessage(TypedDict):
    """One tool call as an assistant message of the agent protocol, sent to the engine as it is."""

    role: Literal["assistant"]
    content: None
    tool_calls: list[ToolCall]


def briefing_text(messages: list[JsonObject]) -> str:
    """The opening messages as one text: what every agent of the run is shown before it acts."""
    parts = [str(m.get("content") or "") for m in messages if m.get("role") in ("system", "user")]
    return "\n\n".join(p for p in parts if p)


def tool_message(index: int, name: str, arguments: JsonObject | None) -> ToolCallMessage:
    """One tool call as the assistant message the engine takes (its id numbered by the step)."""
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"call_{index}", "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments or {})}}]}


def answer_text(messages: list[JsonObject], done: bool, status: str) -> str:
    """What a tool call answers: the messages that followed it, and the run's end once it is over."""
    parts = [str(m.get("content") or "") for m in messages]
    if done:
        parts.append(f"[the run is over: {status}. Start a new session for the next run.]")
    return "\n\n".join(p for p in parts if p) or "(no output)"


class Over(Exception):
    """The session's run is over or was handed back: nothing more can be played in it."""


class Play:
    """One run as an MCP session plays it."""

    run_id: str
    instructions: str
    tools: list[JsonObject]  # the kit's OpenAI function-tool schemas, as every agent is given them
    status: str = "running"

    def call(self, name: str, arguments: JsonObject | None) -> tuple[str, bool]:
        """Apply one tool call: (the answer's text, whether the run is over now). Raises `Over`."""
        raise NotImplementedError

    def close(self) -> None:
        """The session ended: an unfinished run is handed back (pending again), nothing recorded."""


# -- a slot of a local batch (stdio) ------------------------------------------------------------


class LocalPlay(Play):
    """A slot of a run batch played in this process (`assay mcp`). `clock` measures the agent's
    time between calls (injected by tests); a session that stays away past the run's time is
    ended as a `timeout` by `expire_if_due`."""

    def __init__(self, store: Store, batch_id: str, planned: PlannedRun, stepper: Stepper, holder: Any,
                 loaded: Any, clock: Callable[[], float]) -> None:
        self.store, self.batch_id, self.planned = store, batch_id, planned
        self.run_id = planned.run_id
        self._stepper, self._holder, self._loaded, self._clock = stepper, holder, loaded, clock
        assert stepper.turn is not None
        self.instructions = briefing_text(stepper.turn.messages)
        self.tools = stepper.turn.tools
        self._since = clock()
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def start(cls, store: Store, batch_id: str, clock: Callable[[], float] = time.monotonic) -> LocalPlay | None:
        """Claim the batch's next pending slot and open its run; None when no slot is pending."""
        from assay.service import execution
        from assay.store.claims import ClaimRepo, Holder

        row = RunsRepo(store).batch_agent(batch_id)
        if row is None or row.load_spec != MCP_SPEC:
            raise Conflict("this batch is not played over MCP", "batch", value=batch_id)
        limits = Limits(turn_limit=row.turn_limit, time_limit=row.time_limit)
        scenarios = execution.stored_scenarios(store, batch_id)
        plan = {slot.run_id: PlannedRun(slot.run_id, slot.slot, slot.case_id, slot.scenario_hash, slot.trial,
                                        slot.seed) for slot in RunsRepo(store).planned_runs(batch_id)}
        holder = Holder(store)
        try:
            won, _cursor = ClaimRepo(store).claim(batch_id, holder.id, 1)
            if not won:
                holder.end()
                return None
            planned = plan[won[0]]
            loaded = scenarios[planned.scenario_hash]
            stepper = Stepper(open_episode(loaded, planned, limits))
        except BaseException:
            holder.end()
            raise
        play = cls(store, batch_id, planned, stepper, holder, loaded, clock)
        if stepper.done:  # the world could not open: recorded as the harness's `error`
            play._record()
        return play

    def call(self, name: str, arguments: JsonObject | None) -> tuple[str, bool]:
        with self._lock:
            if self._stepper.done or self._closed:
                raise Over(f"the run is over: {self.status}" if self._stepper.done else "the session ended")
            now = self._clock()
            index = len(self._stepper.marks)
            self._stepper.send(tool_message(index, name, arguments), max(0.0, now - self._since))
            self._since = self._clock()
            after = self._stepper.after(index)
            done = self._stepper.done
            if done:
                self._record()
            return answer_text(after, done, self.status), done

    def expire_if_due(self) -> bool:
        """End the run as a `timeout` when the agent has stayed away past its time; True if it did."""
        with self._lock:
            if self._stepper.done or self._closed:
                return False
            left = self._stepper.episode.time_left - (self._clock() - self._since)
            if left >= 0:
                return False
            self._stepper.expire()
            self._record()
            return True

    def _record(self) -> None:
        from assay.service import completion
        from assay.service.execution import RunWriter

        record = self._stepper.record
        assert record is not None
        self.status = record.status
        writer = RunWriter(self.store, [self._loaded])
        try:
            writer(record, self._stepper.episode.steps)
        finally:
            writer.close()
            self._holder.end()
        completion.complete(self.store, self.batch_id)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._holder.end()  # an unfinished slot is pending again; a recorded one stays recorded


# -- a remote run of an agent key's submissions (HTTP) -------------------------------------------


class RemotePlay(Play):
    """A leased remote run, each tool call one step of the step API (`service.remote.step`)."""

    def __init__(self, store: Store, actor: Actor, lease: LeaseView) -> None:
        self.store, self.actor = store, actor
        self.run_id = lease["run_id"]
        self.instructions = briefing_text(lease["messages"])
        self.tools = lease["tools"]
        self._next = int(lease["step"])
        self._lock = threading.Lock()
        self._over = False
        self._released = False

    @classmethod
    def lease(cls, store: Store, actor: Actor) -> RemotePlay | None:
        from assay.service import remote

        view = remote.next_run(store, actor=actor)
        return None if view is None else cls(store, actor, view)

    def call(self, name: str, arguments: JsonObject | None) -> tuple[str, bool]:
        from assay.service import remote

        with self._lock:
            if self._over or self._released:
                raise Over(f"the run is over: {self.status}" if self._over else
                           "this session's lease ended: the run was handed back; start a new session")
            answer = remote.step(self.store, self.run_id, tool_message(self._next, name, arguments),
                                 actor=self.actor, index=self._next)
            self._next += 1
            self.status = answer["status"]
            if answer["done"]:
                self._over = True
            return answer_text(answer["messages"], answer["done"], answer["status"]), bool(answer["done"])

    def close(self) -> None:
        """Hand the run back (the session ended or its lease ran out): pending again at once."""
        from assay.service import remote

        with self._lock:
            if self._over or self._released:
                return
            self._released = True
        remote.release(self.store, self.run_id, actor=self.actor)


# -- the MCP server -------------------------------------------------------------------------------


def _tool(types: Any, schema: JsonObject) -> Any:
    """An MCP tool from a kit's OpenAI function-tool schema (its name, description and parameters)."""
    function = schema["function"]
    assert isinstance(function, dict)  # the kits' schemas (`worlds`) are OpenAI function tools
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    return types.Tool(name=str(function["name"]), description=str(function.get("description") or ""),
                      input_schema=parameters)


def mcp_server(play_of: Callable[[Any], Play], *, on_initialize: Callable[[Any], Any] | None = None) -> Any:
    """The MCP server of a play: `play_of(ctx)` is the session's play (the one play of a stdio
    server; on HTTP, the one the session leased). `on_initialize(ctx)`, when given, is awaited as
    a session opens (HTTP: it leases the run) and may raise `mcp.MCPError` to refuse it. The
    session's instructions are its play's briefing."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    async def list_tools(ctx: Any, _params: Any) -> types.ListToolsResult:
        play = play_of(ctx)
        return types.ListToolsResult(tools=[_tool(types, t) for t in play.tools])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        play = play_of(ctx)
        try:
            text, _done = await anyio.to_thread.run_sync(play.call, params.name, params.arguments)
        except Over as exc:
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(exc))], is_error=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    async def list_resources(ctx: Any, _params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(
            name="briefing", uri=BRIEFING_URI, mime_type="text/plain",
            description="What the run's agent is told before it acts: the world's rules and the task.")])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if str(params.uri) != BRIEFING_URI:
            raise MCPError(code=types.INVALID_PARAMS, message=f"no such resource: {params.uri}")
        play = play_of(ctx)
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=BRIEFING_URI, mime_type="text/plain", text=play.instructions)])

    server: Any = Server("assay", version="1", on_list_tools=list_tools, on_call_tool=call_tool,
                         on_list_resources=list_resources, on_read_resource=read_resource)

    async def briefing(ctx: Any, call_next: Any) -> Any:
        if ctx.method == "initialize" and on_initialize is not None:
            await on_initialize(ctx)
        result = await call_next(ctx)
        if ctx.method in ("initialize", "server/discover") and isinstance(result, dict):
            result = {**result, "instructions": play_of(ctx).instructions}
        return result

    server.middleware.append(briefing)
    return server


def batch_for(store: Store, bundle: Any, *, trials: int, seed: int, limits: Limits, label: str | None,
              new: bool = False) -> tuple[str, bool]:
    """The run batch whose next pending slot an `assay mcp` session plays: the newest unfinished
    batch played over MCP with the same suite version, trials, seed and limits (so each session,
    one per launch of a stdio server, plays the next run of one batch), else a new one.
    Returns (batch id, whether it was created now)."""
    from assay.service.runs import create_run_batch

    if not new:
        runs = RunsRepo(store)
        for row in runs.batch_listing("run"):
            if (row.agent_spec != MCP_SPEC or row.suite_key != bundle.key
                    or row.suite_version != bundle.version or row.trials != trials
                    or row.n_recorded >= row.n_planned):
                continue
            batch = runs.batch(row.id)
            agent = runs.batch_agent(row.id)
            if (batch is not None and batch.base_seed == seed and agent is not None
                    and agent.turn_limit == limits.turn_limit and agent.time_limit == limits.time_limit
                    and (label is None or row.agent_label == label)):
                return row.id, False
    batch_id, _planned = create_run_batch(store, bundle, mcp_factory(), trials=trials, seed=seed, label=label,
                                          limits=limits)
    return batch_id, True
