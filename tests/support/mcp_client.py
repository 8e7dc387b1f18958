"""Play a run through the official `mcp` SDK's client, with a scripted reference agent's moves.

The agent sees what an MCP client gives it: the briefing (read as the `assay://briefing`
resource) and the text each tool call answers; its every move is one `tools/call`."""

from __future__ import annotations

import json
from typing import Any

from assay.agents.loader import load_agent

OVER = "\n\n[the run is over: "


async def play(client: Any, agent_spec: str = "reference:diligent", max_calls: int | None = None) -> dict[str, Any]:
    """Play the session's run with `agent_spec` to its end (or `max_calls` calls); what was seen."""
    tools = [t.name for t in (await client.list_tools()).tools]
    briefing = (await client.read_resource("assay://briefing")).contents[0].text
    init = client.session.initialize_result or client.session.discover_result
    agent = load_agent(agent_spec)()
    messages: list[dict[str, Any]] = [{"role": "user", "content": briefing}]
    answers: list[str] = []
    while max_calls is None or len(answers) < max_calls:
        move = agent(messages, [])
        call = move["tool_calls"][0]["function"]
        result = await client.call_tool(call["name"], json.loads(call["arguments"]))
        text = result.content[0].text
        answers.append(text)
        messages += [move, {"role": "tool", "tool_call_id": move["tool_calls"][0]["id"],
                            "content": text.split(OVER)[0]}]
        if OVER in text:
            break
    return {"tools": tools, "briefing": briefing, "instructions": init.instructions, "answers": answers,
            "over": bool(answers) and OVER in answers[-1]}
