"""A session's tool list, frozen when the session first loads and kept in the store.

The tools a request lists are part of the provider's cached prefix, like the system prompt. A tool list
that changes later (an MCP server's `tools/list_changed`, a server that came up late or restarted with
other tools) applies from the next session; a session evicted from memory or loaded after a restart
lists exactly the schemas it froze, in the same order, byte for byte. Each call goes to the tool of that
name the bot has now; a tool that has since disappeared answers with an error saying so (it is looked up
again at each call, so a server that comes back serves it again).

A list freezes once the features bringing tools have settled (an MCP server still in its first start gets
a few seconds): what it still lacks then is logged and kept with the session, and `/status` names it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hermes_engine.ports.feature import Feature
from hermes_engine.ports.session import SessionHandle
from hermes_engine.ports.storage import Store
from hermes_engine.ports.tools import Tool, ToolContext, ToolResult, ToolSchema
from hermes_engine.tools.registry import FunctionTool, ToolRegistry

log = logging.getLogger(__name__)

STATE_KEY = "tools"  # in the session's state: the fingerprint of its frozen list
WITHOUT_KEY = "tools_without"  # in the session's state: the sources that were not up when it froze
CONTEXT_PARAM = "_hermes_ctx"


def encode(tools: ToolRegistry) -> str:
    return json.dumps([{"name": s.name, "description": s.description, "parameters": s.parameters}
                       for s in tools.schemas()], ensure_ascii=False, separators=(",", ":"))


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def restore(text: str, live: ToolRegistry) -> ToolRegistry:
    """The frozen schemas, each served by the bot's current tool of that name."""
    tools = []
    for item in json.loads(text):
        schema = ToolSchema(item["name"], item["description"], item["parameters"])
        current = live.get(schema.name)
        if current is not None and current.schema == schema:
            tools.append(current)
        else:
            tools.append(_late_bound(schema, live))
    return ToolRegistry(tools)


def _late_bound(schema: ToolSchema, live: ToolRegistry) -> Tool:
    """The frozen schema; each call finds the tool of that name the bot has then."""
    current = live.get(schema.name)

    async def run(**arguments: Any) -> ToolResult:
        ctx: ToolContext = arguments.pop(CONTEXT_PARAM)
        tool = live.get(schema.name)
        if tool is None:
            return ToolResult(f"Error: the tool {schema.name} is no longer available (its source no longer "
                              "offers it). Do without it; /new starts a conversation with the current tools.",
                              is_error=True)
        return await tool.invoke(arguments, ctx)

    limit = current.time_limit if current is not None else 60.0
    toolset = current.toolset if current is not None else "frozen"
    return replace(FunctionTool(schema.name, schema.description, schema.parameters, run, toolset, CONTEXT_PARAM),
                   time_limit=limit + 1)


async def session_tools(store: Store, session: SessionHandle, live: ToolRegistry,
                        features: Sequence[Feature]) -> ToolRegistry:
    """The session's frozen list (stored), or the bot's current tools, frozen now that they settled."""
    frozen = session.record.state.get(STATE_KEY)
    if isinstance(frozen, str):
        text = await store.get_tool_list(frozen)
        if text is not None:
            return restore(text, live)
    without = [source for feature in features for source in await feature.settle_tools()]
    if without:
        log.warning("session %s starts without the tools of %s; /new after they are up brings them",
                    session.key, ", ".join(without))
    tools = ToolRegistry(list(live))
    text = encode(tools)
    await store.put_tool_list(fingerprint(text), text)
    state = {**session.record.state, STATE_KEY: fingerprint(text), WITHOUT_KEY: without}
    await store.update_session(session.record.id, state=state)
    session.record = replace(session.record, state=state)
    return tools


def started_without(session: SessionHandle) -> list[str]:
    """The sources whose tools the session's frozen list lacks because they were not up when it froze."""
    return list(session.record.state.get(WITHOUT_KEY) or [])
