"""The `memory` agent tool, named and shaped as in Hermes Agent: memory(action, target, content, old_text).

The owner is always the person the turn runs for (`ctx.person_id`); the model cannot name another person.
`target="shared"` writes the group/channel/server memory and works only where `ctx.shared_scope` is set.
It is in the schema everywhere (schemas are static and shared by all sessions of a bot) and refused at run
time in a DM, which costs a few schema tokens but keeps one cacheable tool list.
In a multi-speaker session, errors never echo the person's private entries into the shared conversation.
"""

from __future__ import annotations

from typing import Literal

from hermes_engine.memory.store import MemoryBook, MemoryOwner
from hermes_engine.tools.registry import ToolContext, ToolResult, tool


@tool(toolset="memory")
async def memory(action: Literal["add", "replace", "remove"], target: Literal["memory", "user", "shared"],
                 content: str | None = None, old_text: str | None = None, *, ctx: ToolContext) -> ToolResult:
    """Save durable facts for future sessions (in your prompt from the next session on).
    Store declarative facts ("User prefers concise answers", "Project deploys with Docker on Fly.io"), never
    commands or instructions to yourself. One short fact per entry; when full, replace or remove to consolidate.

    Args:
        action: add a new entry; replace the entry containing old_text with content; remove the entry
            containing old_text
        target: memory = your notes (environment, projects, conventions, lessons); user = this person's
            profile (preferences, communication style); shared = notes for this whole group (group chats only)
        content: the entry text (add, replace)
        old_text: a short unique part of the existing entry (replace, remove)
    """
    book: MemoryBook | None = ctx.services.get("memory")
    if book is None:
        return ToolResult("Error: memory is not available in this session.", is_error=True)
    if action not in ("add", "replace", "remove"):
        return ToolResult(f"Error: unknown action {action!r}; use add, replace or remove.", is_error=True)
    if target not in ("memory", "user", "shared"):
        return ToolResult(f"Error: unknown target {target!r}; use memory, user or shared.", is_error=True)

    if target == "shared":
        if not ctx.shared_scope:
            return ToolResult("Error: there is no shared memory here (this is not a group chat); use target "
                              "memory or user.", is_error=True)
        owner, document, show_entries = MemoryOwner.shared(ctx.shared_scope), "memory", True
    else:
        if ctx.person_id is None:
            return ToolResult("Error: memory is unavailable because this speaker is not a known person.",
                              is_error=True)
        owner, document = MemoryOwner.person(ctx.person_id), target
        show_entries = ctx.chat_kind == "dm"  # private entries are not echoed into a multi-speaker chat

    if action == "add":
        if not (content or "").strip():
            return ToolResult("Error: add needs content (the fact to remember).", is_error=True)
        result = await book.add(owner, document, content or "", show_entries=show_entries)
    elif action == "replace":
        if not (content or "").strip():
            return ToolResult("Error: replace needs content (the new text); use remove to delete an entry.",
                              is_error=True)
        result = await book.replace(owner, document, old_text or "", content or "", show_entries=show_entries)
    else:
        result = await book.remove(owner, document, old_text or "", show_entries=show_entries)
    return ToolResult(str(result), is_error=not result.ok)
