"""The engine's side of the files people send, as a `Feature`: it serves the turn the bot's `VoiceNotes`
(`VOICE_NOTES`) and offers `read_document` (toolset `core`) for documents longer than their message showed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hermes_engine.attachments.pages import read_document_tool
from hermes_engine.attachments.voice import VOICE_NOTES, VoiceNotes
from hermes_engine.ports.conversation import Message
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.host import Host
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.tools import Tool


class AttachmentsFeature(Feature):
    name = "attachments"

    def __init__(self, voice_notes: VoiceNotes) -> None:
        self.voice_notes = voice_notes
        self._host: Host | None = None

    async def start(self, host: Host) -> None:
        self._host = host

    def _history(self, session_key: str) -> list[Message] | None:
        session = self._host.session(session_key) if self._host is not None else None
        return list(session.history.view()) if session is not None and session.history.loaded else None

    def tools(self) -> list[Tool]:
        return [read_document_tool(self._history)]

    def services(self) -> Mapping[ServiceKey[Any], object]:
        return {VOICE_NOTES: self.voice_notes}


__all__ = ["AttachmentsFeature"]
