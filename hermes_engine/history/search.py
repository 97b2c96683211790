"""Session search: finding what was said, however long ago.

- `session_search(query, limit)` (toolset "search"): full-text search over the person's own past messages,
  the assistant's answers in sessions they took part in, and compaction summaries — so what compression
  took out of the context is still one tool call away. The scope rules are the `SearchIndex` port's:
  never another person's messages, never a group's conversation to someone who was not in it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from hermes_engine.ports.feature import Feature
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.tools import Tool, ToolContext, ToolResult
from hermes_engine.tools.registry import tool

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host

log = logging.getLogger(__name__)

MAX_LIMIT = 20


class SessionSearch:
    """What the tool needs at run time: the store (set when the gateway starts)."""

    def __init__(self) -> None:
        self.host: Host | None = None

    async def search(self, ctx: ToolContext, query: str, limit: int) -> str | ToolResult:
        if self.host is None:
            return ToolResult("Error: session search is not available here (no host).", is_error=True)
        if ctx.person_id is None:
            return ToolResult("Error: there is no person to search for in this context.", is_error=True)
        if not query.strip():
            return ToolResult("Error: give some words to search for.", is_error=True)
        limit = max(1, min(MAX_LIMIT, int(limit)))
        hits = await self.host.store.search_messages(person_id=ctx.person_id, bot=ctx.bot, query=query, limit=limit)
        if not hits:
            return f"No past messages match {query!r}."
        lines = [f"{len(hits)} match{'es' if len(hits) != 1 else ''} for {query!r} (best first):"]
        for n, hit in enumerate(hits, 1):
            who = {"user": "you", "assistant": "assistant", "summary": "summary of earlier conversation"}[hit.role]
            here = " (this conversation)" if hit.session_id == ctx.session_id else ""
            lines.append(f"{n}. [session #{hit.session_id}{here}, {hit.created_at:%Y-%m-%d}, {who}] {hit.snippet}")
        return "\n".join(lines)


_search = SessionSearch()
SEARCHER: ServiceKey[SessionSearch] = ServiceKey("session_search")


@tool(toolset="search")
async def session_search(query: str, ctx: ToolContext, limit: int = 5) -> str | ToolResult:
    """Search your past conversations with this person (their messages, your answers, and summaries of
    compressed history) by keywords. Use it when they refer to something said earlier that you no longer see.

    Args:
        query: Keywords to look for, e.g. "invoice number March".
        limit: How many results to return (1-20, default 5).
    """
    searcher = ctx.services.get(SEARCHER) or _search
    return await searcher.search(ctx, query, limit)


class SearchFeature(Feature):
    """The `session_search` tool."""

    name = "search"

    def __init__(self) -> None:
        self.searcher = SessionSearch()
        self.host: Host | None = None

    def tools(self) -> list[Tool]:
        return [session_search]

    def services(self) -> dict[ServiceKey[Any], object]:
        return {SEARCHER: self.searcher}

    async def start(self, host: Host) -> None:
        self.host = host
        self.searcher.host = host


__all__ = ["SearchFeature", "SessionSearch", "session_search"]
