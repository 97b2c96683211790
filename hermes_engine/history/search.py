"""Session search and `/compress`: finding what was said, however long ago, and folding a long conversation.

- `session_search(query, limit)` (toolset "search"): full-text search over the person's own past messages,
  the assistant's answers in sessions they took part in, and compaction summaries — so what compression
  took out of the context is still one tool call away. The scope rules are the `SearchIndex` port's:
  never another person's messages, never a group's conversation to someone who was not in it.
- `/compress`: compress this conversation now and say how many tokens it took before and after.
- `/status` gets a line with the context size and the number of compressions.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from hermes_engine.compression.service import compaction_service, is_summary
from hermes_engine.agent.prompt import SessionScope
from hermes_engine.core.commands import CommandContext, CommandRegistry
from hermes_engine.ports.feature import Feature
from hermes_engine.tools.registry import Tool, ToolContext, ToolResult, tool

if TYPE_CHECKING:
    from hermes_engine.core.gateway import Gateway

log = logging.getLogger(__name__)

MAX_LIMIT = 20


class SessionSearch:
    """What the tool needs at run time: the store (set when the gateway starts)."""

    def __init__(self) -> None:
        self.gateway: "Gateway | None" = None

    async def search(self, ctx: ToolContext, query: str, limit: int) -> str | ToolResult:
        if self.gateway is None:
            return ToolResult("Error: session search is not available here (no gateway).", is_error=True)
        if ctx.person_id is None:
            return ToolResult("Error: there is no person to search for in this context.", is_error=True)
        if not query.strip():
            return ToolResult("Error: give some words to search for.", is_error=True)
        limit = max(1, min(MAX_LIMIT, int(limit)))
        hits = await self.gateway.store.search_messages(person_id=ctx.person_id, bot=ctx.bot, query=query, limit=limit)
        if not hits:
            return f"No past messages match {query!r}."
        lines = [f"{len(hits)} match{'es' if len(hits) != 1 else ''} for {query!r} (best first):"]
        for n, hit in enumerate(hits, 1):
            who = {"user": "you", "assistant": "assistant", "summary": "summary of earlier conversation"}[hit.role]
            here = " (this conversation)" if hit.session_id == ctx.session_id else ""
            lines.append(f"{n}. [session #{hit.session_id}{here}, {hit.created_at:%Y-%m-%d}, {who}] {hit.snippet}")
        return "\n".join(lines)


_search = SessionSearch()


@tool(toolset="search")
async def session_search(query: str, ctx: ToolContext, limit: int = 5) -> str | ToolResult:
    """Search your past conversations with this person (their messages, your answers, and summaries of
    compressed history) by keywords. Use it when they refer to something said earlier that you no longer see.

    Args:
        query: Keywords to look for, e.g. "invoice number March".
        limit: How many results to return (1-20, default 5).
    """
    searcher: SessionSearch = ctx.services.get("session_search", _search)
    return await searcher.search(ctx, query, limit)


class SearchFeature(Feature):
    """The `session_search` tool, `/compress`, and a context line in `/status`."""

    name = "search"

    def __init__(self) -> None:
        self.searcher = SessionSearch()
        self.gateway: "Gateway | None" = None

    def tools(self) -> list[Tool]:
        return [session_search]

    def services(self) -> dict[str, Any]:
        return {"session_search": self.searcher}

    async def start(self, gateway: "Gateway") -> None:
        self.gateway = gateway
        self.searcher.gateway = gateway

    def register_commands(self, registry: CommandRegistry) -> None:
        registry.command("compress", "shrink this conversation's context now (nothing is deleted)")(self._compress)

    async def _compress(self, ctx: CommandContext) -> str:
        gateway, session = ctx.gateway, ctx.session
        await gateway.ensure_loaded(session, ctx.person_id)
        context = compaction_service(gateway).context(session)
        report = await context.compress_now()
        window = context.window()
        before, after = report.tokens_before, report.tokens_after
        sizes = f"~{before:,} → ~{after:,} tokens (context window {window:,})"
        if report.failed and not report.pruned:
            return f"Could not compress right now: {report.failed}. The conversation is unchanged (~{before:,} tokens)."
        if report.failed:
            return (f"Could not summarise right now ({report.failed}); trimmed {report.pruned} old tool "
                    f"output{'s' if report.pruned != 1 else ''} instead: {sizes}.")
        if not report.changed:
            return f"Nothing to compress yet: the conversation is ~{before:,} tokens (context window {window:,})."
        parts = []
        if report.summarised:
            parts.append(f"summarised {report.summarised} earlier messages")
        if report.pruned:
            parts.append(f"trimmed {report.pruned} old tool output{'s' if report.pruned != 1 else ''}")
        return f"Compressed: {sizes}; {' and '.join(parts)}. Nothing was deleted — session_search still finds it."

    async def status_lines(self, scope: SessionScope, person_id: int | None) -> list[str]:
        gateway = self.gateway
        if gateway is None:
            return []
        session = next((s for s in gateway.sessions.values() if s.record.id == scope.session_id), None)
        if session is None or session.history is None:
            return []
        context = compaction_service(gateway).context(session)
        tokens, window = context.measure(session.history), context.window()
        summary = next((m for m in session.history if is_summary(m)), None)
        line = f"Context: ~{tokens:,} of {window:,} tokens ({tokens * 100 // max(1, window)}%)"
        if summary is not None:
            line += f", earlier part summarised (compaction #{summary.meta['compaction'].get('id')})"
        return [line]


__all__ = ["SearchFeature", "SessionSearch", "session_search"]
