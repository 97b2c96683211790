"""Prompt builder: a system prompt that is byte-identical for a whole session.

The prefix (system prompt + tool schemas) is what the provider caches, so it holds only stable text: the
persona, frozen snapshots taken at session start (memory, skill index) and tool guidance. Anything that
changes per turn (the speaker's profile in a group, skill hints) travels with the user message instead.
No clock, host name, path or PID ever enters it.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import replace
from pathlib import Path
from typing import Any

from hermes_engine.attachments.blobs import ensure_local, local_path
from hermes_engine.attachments.documents import DOCUMENTS, documents_for_model, readable
from hermes_engine.policy.untrusted import SENT_FILE
from hermes_engine.ports.conversation import ImagePart, Message
from hermes_engine.ports.inbound import InboundMessage
from hermes_engine.ports.prompt import PromptContributor
from hermes_engine.ports.session import SessionScope
from hermes_engine.providers.vision import IMAGE_TYPES, MAX_IMAGE_BYTES
from hermes_engine.tools.registry import ToolRegistry

TOOL_GUIDANCE = """\
# Working with tools
- Call tools when they help; independent calls can go in one step and run in parallel.
- A tool error is information: read it, fix the call, or explain the problem to the person.
- Do not repeat a tool call that already succeeded with the same arguments."""


class PromptBuilder:
    def __init__(self, soul: str, tools: ToolRegistry, contributors: list[PromptContributor] | None = None):
        self.soul = soul.strip()
        self.tools = tools
        self.contributors = list(contributors or [])

    async def system_prompt(self, scope: SessionScope) -> str:
        parts = [self.soul]
        for contributor in self.contributors:
            section = await contributor.frozen_section(scope)
            if section:
                parts.append(section.strip())
        if len(self.tools):
            parts.append(TOOL_GUIDANCE)
        if scope.multi_speaker:
            parts.append("Several people talk in this conversation; each message starts with its speaker's "
                         "name in brackets. Address people by name when it helps.")
        return "\n\n".join(parts) + "\n"

    async def user_message(self, scope: SessionScope, msg: InboundMessage, speaker_person_id: int | None,
                           images: tuple[ImagePart, ...] = ()) -> Message:
        text = msg.text
        if msg.attachments:
            # documents are parsed here (a PDF takes a while): off the event loop
            pager = self.tools.get(READ_DOCUMENT) is not None
            text = (text + "\n\n" if text else "") + await asyncio.to_thread(describe_attachments, msg, pager)
        if scope.multi_speaker:
            text = f"[{msg.user_name or msg.user_id}] {text}"
        notes: list[str] = []
        private: list[str] = []
        for contributor in self.contributors:
            note = await contributor.turn_note(scope, speaker_person_id, msg.text)
            if note:
                (private if contributor.private_notes else notes).append(note.strip())
        if notes:
            text = text + "\n\n" + "\n\n".join(notes)
        meta: dict[str, Any] = {"speaker": msg.user_id, "person_id": speaker_person_id, "platform": msg.platform}
        if private:
            meta[PRIVATE_NOTE] = "\n\n".join(private)
        if documents := readable(msg.attachments):  # where `read_document` finds them in later turns
            meta[DOCUMENTS] = documents
        return Message(role="user", content=text, images=images, meta=meta)


PRIVATE_NOTE = "private_note"


def for_this_turn(message: Message) -> Message:
    """The user message as the model sees it during its own turn: with the speaker's private note."""
    note = message.meta.get(PRIVATE_NOTE)
    return replace(message, content=f"{message.content}\n\n{note}") if note else message


def for_history(message: Message) -> Message:
    """The user message as stored and as later turns see it: without the private note."""
    if PRIVATE_NOTE not in message.meta:
        return message
    return replace(message, meta={k: v for k, v in message.meta.items() if k != PRIVATE_NOTE})


def load_images(msg: InboundMessage) -> tuple[ImagePart, ...]:
    """Images the person sent, for vision-capable models (the description travels as text regardless): only
    the types and sizes every provider takes, as the adapters read them from the bytes, since one image a
    provider refuses would fail the whole request. The turn's first look at its files: each is put into the
    blob store, or brought to this replica from it (`attachments/blobs.py`)."""
    ensure_local(msg.attachments)
    parts = []
    for a in msg.attachments:
        if a.path and a.mime_type in IMAGE_TYPES and 0 < a.size <= MAX_IMAGE_BYTES:
            path = local_path(a)
            try:
                data = Path(path or a.path).read_bytes()
            except OSError:
                continue
            parts.append(ImagePart(a.mime_type, base64.b64encode(data).decode("ascii")))
    return tuple(parts)


READ_DOCUMENT = "read_document"


def describe_attachments(msg: InboundMessage, pager: bool = False) -> str:
    """Each file by name, type and size (or why it was refused), then the text of the documents among them
    (`attachments/documents.py`: capped, marked untrusted; `pager`: the note says how to read on)."""
    lines = []
    for a in msg.attachments:
        size_kb = max(1, a.size // 1024)
        if a.refused_reason:
            lines.append(f"[attachment refused: {a.file_name} ({a.mime_type}, {size_kb} KB): {a.refused_reason}]")
        else:
            lines.append(f"{SENT_FILE}{a.kind} {a.file_name} ({a.mime_type}, {size_kb} KB)]")
    return "\n".join([*lines, *documents_for_model(msg.attachments, pager=pager)])
