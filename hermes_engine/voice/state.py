"""Whether a conversation has voice replies on, kept durably per conversation (its session key, so it
outlives `/new`) as a small JSON document in the store's `DocumentStore` (area `voice`): every replica reads
the same switch, and no table is needed. Beside the switch: whether the person was already told that the
speech endpoint failed here (told once per conversation; `/voice on` asks again)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from hermes_engine.ports.storage import DocumentStore

__all__ = ["AREA", "VoiceState", "VoiceSwitches"]

AREA = "voice"
ATTEMPTS = 3  # compare-and-set writes lost to another writer before giving up


@dataclass(frozen=True)
class VoiceState:
    on: bool
    failure_told: bool = False


class VoiceSwitches:
    """Reads and writes each conversation's `VoiceState`; `default_on` is a conversation's state until set."""

    def __init__(self, documents: DocumentStore, default_on: bool) -> None:
        self.documents, self.default_on = documents, default_on

    async def get(self, conversation: str) -> VoiceState:
        doc = await self.documents.get_document(AREA, conversation)
        if doc is None:
            return VoiceState(on=self.default_on)
        try:
            data = json.loads(doc.text)
            return VoiceState(on=bool(data.get("on")), failure_told=bool(data.get("failure_told")))
        except (ValueError, AttributeError):
            return VoiceState(on=self.default_on)

    async def put(self, conversation: str, state: VoiceState) -> bool:
        """Write `state` (whatever was there); False when other writers kept winning."""
        text = json.dumps(asdict(state))
        for _ in range(ATTEMPTS):
            doc = await self.documents.get_document(AREA, conversation)
            if await self.documents.put_document(AREA, conversation, text,
                                                 expected_version=doc.version if doc else 0) is not None:
                return True
        return False
