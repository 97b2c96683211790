"""The engine's side of the files people send, as a `Feature`: it serves the turn the bot's `VoiceNotes`
(`VOICE_NOTES`), offers `read_document` (toolset `core`) for documents longer than their message showed, and
makes the files reachable on every replica (`blobs.py`): each message's files are put into the store's blob
store as it arrives (where blobs are shared), and each turn finds them through this gateway's
`AttachmentFiles`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hermes_engine.attachments.blobs import AttachmentFiles, bind
from hermes_engine.attachments.pages import read_document_tool
from hermes_engine.attachments.voice import VOICE_NOTES, VoiceNotes
from hermes_engine.ports.conversation import Message
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import InboundMessage
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.session import SessionScope
from hermes_engine.ports.tools import Tool


class AttachmentsFeature(Feature):
    name = "attachments"

    def __init__(self, voice_notes: VoiceNotes) -> None:
        self.voice_notes = voice_notes
        self._host: Host | None = None
        self.files: AttachmentFiles | None = None

    async def start(self, host: Host) -> None:
        self._host = host
        self.files = AttachmentFiles(Path(host.settings.home), host.store)

    def on_message(self, session_key: str, message: InboundMessage) -> None:
        """Put the message's files into the blob store now, on the replica that downloaded them, before
        another replica may answer the message."""
        if self._host is not None and self.files is not None and self.files.shared and message.attachments:
            self._host.spawn(self.files.keep_all(message.attachments), f"attachments:keep:{message.event_id}")

    async def on_turn_start(self, scope: SessionScope) -> None:
        if self.files is not None:
            bind(self.files)  # the turn's worker threads and tools find its files through this gateway's

    def _history(self, session_key: str) -> list[Message] | None:
        session = self._host.session(session_key) if self._host is not None else None
        return list(session.history.view()) if session is not None and session.history.loaded else None

    def tools(self) -> list[Tool]:
        return [read_document_tool(self._history)]

    def services(self) -> Mapping[ServiceKey[Any], object]:
        return {VOICE_NOTES: self.voice_notes}


__all__ = ["AttachmentsFeature"]
