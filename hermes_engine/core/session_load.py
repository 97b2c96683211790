"""What a session needs before its first turn here, loaded once per session: its history (the compressed
view, if any), its usage, and the system prompt and tool list it froze.

Both are frozen at the session's first turn and kept with it in the store, so the request prefix stays the
same byte for byte for the whole session, across restarts and replicas: what a provider's prefix cache
can serve. A DM's scope learns its owner here (the person whose memory the prompt holds)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hermes_engine.agent.prompt import PromptBuilder
from hermes_engine.core.tool_lists import session_tools
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.history import HistoryView
from hermes_engine.ports.session import SessionHandle
from hermes_engine.ports.storage import Store
from hermes_engine.tools.registry import ToolRegistry


async def ensure_loaded(session: SessionHandle, person_id: int | None, *, store: Store, prompts: PromptBuilder,
                        tools: ToolRegistry, features: Sequence[Feature], view: HistoryView) -> None:
    if not session.history.loaded:
        session.history.load(await view(store, session.record.id))
        session.usage = await store.session_usage(session.record.id)
    if session.tools is None:  # first: the prompt says how to use tools when there are any
        session.tools = await session_tools(store, session, tools, features)
    if session.system_prompt is None:
        frozen = session.record.state.get("system_prompt")
        if frozen is None:
            scope = session.scope
            if scope.chat_kind == "dm":
                scope = replace(scope, person_id=person_id)
                session.scope = scope
            frozen = await prompts.system_prompt(scope)
            state = {**session.record.state, "system_prompt": frozen, "owner": person_id}
            await store.update_session(session.record.id, state=state)
            session.record = replace(session.record, state=state)
        elif session.scope.chat_kind == "dm":
            session.scope = replace(session.scope, person_id=session.record.state.get("owner"))
        session.system_prompt = frozen
