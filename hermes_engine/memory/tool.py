"""The `memory` agent tool, named and shaped as in Hermes Agent: memory(action, target, content, old_text), or
memory(target, operations=[...]) for several changes applied all or nothing.

The owner is always the person the turn runs for (`ctx.person_id`); the model cannot name another person.
`target="shared"` writes the group/channel/server memory and works only where `ctx.shared_scope` is set.
It is in the schema everywhere (schemas are static and shared by all sessions of a bot) and refused at run
time in a DM, which costs a few schema tokens but keeps one cacheable tool list.
In a multi-speaker session, messages never echo the person's private entries into the shared conversation.
A failed change lists the current entries so the model can correct itself; after `QUIET_AFTER` failures in
one turn it no longer does, and asks the model to go on with its reply instead of spending the turn on them.
Inside the background review (`ctx.in_review`) the tool may add; a call that would rewrite or remove an
entry is staged for the person instead (`hermes_engine.memory.pending`).
A turn whose session read untrusted content (`ctx.untrusted`) has its new entries scanned strictly.
"""

from __future__ import annotations

from typing import Any, Literal

from hermes_engine.memory.book import Change, MemoryBook, MemoryResult
from hermes_engine.memory.documents import MemoryOwner
from hermes_engine.memory.pending import PendingChanges
from hermes_engine.policy.security import ScanMode
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.tools import ToolContext, ToolResult
from hermes_engine.tools.registry import tool

MEMORY: ServiceKey[MemoryBook] = ServiceKey("memory")
MEMORY_PENDING: ServiceKey[PendingChanges] = ServiceKey("memory_pending")
QUIET_AFTER = 3
_FAILED = "memory: failed changes"


def _changes(action: str | None, content: str | None, old_text: str | None,
             operations: list[dict[str, Any]] | None) -> list[Change] | str:
    """The call as a list of changes, or what is wrong with it."""
    if operations is not None:
        if action:
            return "Error: give either action (one change) or operations (several), not both."
        return [Change.from_dict(op) for op in operations]
    if not action:
        return "Error: missing action (add, replace or remove), or operations for several changes at once."
    if action == "add" and not (content or "").strip():
        return "Error: add needs content (the fact to remember)."
    if action == "replace" and not (content or "").strip():
        return "Error: replace needs content (the new text); use remove to delete an entry."
    return [Change.of(action, content, old_text)]


@tool(toolset="memory")
async def memory(*, action: Literal["add", "replace", "remove"] | None = None,
                 target: Literal["memory", "user", "shared"], content: str | None = None,
                 old_text: str | None = None, operations: list[dict[str, Any]] | None = None,
                 new_text: str | None = None, ctx: ToolContext) -> ToolResult:
    """Save durable facts for future sessions (in your prompt from the next session on).
    Store declarative facts ("User prefers concise answers", "Project deploys with Docker on Fly.io"), never
    commands or instructions to yourself. One short fact per entry; when full, replace or remove to consolidate.

    Args:
        action: add a new entry; replace the entry containing old_text with content (the whole new entry);
            remove the entry containing old_text
        target: memory = your notes (environment, projects, conventions, lessons); user = this person's
            profile (preferences, communication style); shared = notes for this whole group (group chats only)
        content: the entry text (add, replace)
        old_text: a short unique part of the existing entry (replace, remove)
        new_text: the same as content (content wins when both are given)
        operations: instead of action, several changes to one target applied together, all or nothing, e.g.
            [{"action": "remove", "old_text": "..."}, {"action": "add", "content": "..."}]
    """
    book = ctx.services.get(MEMORY)
    if book is None:
        return ToolResult("Error: memory is not available in this session.", is_error=True)
    changes = _changes(action, content or new_text, old_text, operations)
    if isinstance(changes, str):
        return ToolResult(changes, is_error=True)

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

    scan_mode = ScanMode(strict=ctx.untrusted)  # a turn that read untrusted content writes under every rule
    pending = ctx.services.get(MEMORY_PENDING) or PendingChanges(book)
    if ctx.in_review and ctx.person_id is not None and await pending.person_gone(ctx.person_id):
        return ToolResult("Error: the person this review is about asked to be forgotten; nothing was saved.",
                          is_error=True)
    if ctx.in_review and any(c.action != "add" for c in changes):
        if owner.is_shared:
            return ToolResult("Error: a background review may only add to the group's shared memory; rewriting or "
                              "removing its entries needs a live conversation. Nothing was changed.", is_error=True)
        result = await pending.stage(owner, document, changes, show_entries=show_entries, scan_mode=scan_mode)
    else:
        result = await book.apply(owner, document, changes, show_entries=show_entries, scan_mode=scan_mode)
    return _reply(result, ctx)


def _reply(result: MemoryResult, ctx: ToolContext) -> ToolResult:
    """The result for the model; past `QUIET_AFTER` failures in this turn, without the entries again."""
    if result.ok:
        del ctx.counts[_FAILED]
        return ToolResult(str(result))
    ctx.counts[_FAILED] += 1
    failures = ctx.counts[_FAILED]
    if failures <= QUIET_AFTER or not result.listing:
        return ToolResult(str(result), is_error=True)
    return ToolResult(f"{result.without_listing} That is {failures} failed memory changes in this turn, so the "
                      f"entries are not listed again: leave memory as it is for now and go on with your reply.",
                      is_error=True)
