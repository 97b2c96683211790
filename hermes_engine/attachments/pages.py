"""`read_document`: the model reads on in a document a person sent, from a character offset, a part of
`MAX_DOCUMENT_CHARS` at a time (as `web_fetch` pages a long page). The document is found by its name among
the documents the conversation's user messages brought (kept in their meta, so a restart finds them too),
the newest first; a document compression has summarised away, or whose file is gone, is one sentence."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from hermes_engine.attachments.blobs import local_path
from hermes_engine.attachments.documents import DOCUMENTS, MAX_DOCUMENT_CHARS, Unreadable, read_document
from hermes_engine.policy.untrusted import mark
from hermes_engine.ports.conversation import Message
from hermes_engine.ports.tools import Tool, ToolContext, ToolResult
from hermes_engine.tools.registry import tool

History = Callable[[str], list[Message] | None]  # a session key → its messages in view (None: not loaded)


def find_document(history: list[Message], file_name: str) -> dict[str, str] | None:
    for message in reversed(history):
        if message.role != "user":
            continue
        for document in message.meta.get(DOCUMENTS) or ():
            if isinstance(document, dict) and document.get("name") == file_name:
                return document
    return None


def read_part(path: str, fmt: str, offset: int) -> tuple[str, str]:
    """The part of the document's text at `offset`, and the note saying where it ends."""
    doc = read_document(local_path(path) or path, fmt, offset + MAX_DOCUMENT_CHARS)
    if offset and offset >= len(doc.text):
        raise Unreadable(f"offset {offset:,} is past the end of its text ({len(doc.text):,} characters)")
    end = len(doc.text)
    rest = "the end of the document]" if doc.whole else f"call read_document with offset={end} for the rest]"
    return doc.text[offset:end], f"[characters {offset:,}–{end:,}; {rest}"


def read_document_tool(history: History) -> Tool:
    @tool(toolset="core", name="read_document", time_limit=60)
    async def read_document_part(ctx: ToolContext, file_name: str, offset: int = 0) -> ToolResult:
        """Read on in a document the person sent (PDF, DOCX, text): its message showed only the first part.

        Args:
            file_name: the document's name, as its message named it
            offset: character to start at, as the note after the part already shown says
        """
        if not isinstance(offset, int) or offset < 0:
            return ToolResult("Error: offset must be a whole number of characters, 0 or more.", is_error=True)
        document = find_document(history(ctx.session_key) or [], file_name)
        if document is None:
            return ToolResult(f"Error: no document named {file_name!r} was sent in this conversation (or it is "
                              "no longer in view); ask the person to send it again.", is_error=True)
        try:
            text, note = await asyncio.to_thread(read_part, document["path"], document["format"], offset)
        except Unreadable as exc:
            return ToolResult(f"Error: {file_name} could not be read: {exc}.", is_error=True)
        return ToolResult(f"{mark(text, f'the document {file_name}')}\n{note}")

    return read_document_part


__all__ = ["find_document", "read_document_tool", "read_part"]
