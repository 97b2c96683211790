"""Speech out: how the engine turns an answer's text into a voice recording, whatever serves it.

The engine owns this contract; an implementation lives with the providers (an OpenAI-compatible
`/v1/audio/speech` endpoint). What comes back is always OGG/Opus, the one format every platform plays and
Telegram shows as a voice bubble, so the adapters never transcode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from hermes_engine.errors import HermesError

__all__ = ["OGG_OPUS", "Speech", "SpeechError", "SpeechSynthesizer"]

OGG_OPUS = "audio/ogg"


@dataclass(frozen=True)
class Speech:
    """A recording of one text: OGG/Opus bytes and how long it plays (0 when unknown)."""

    data: bytes
    duration_seconds: float = 0.0
    media_type: str = OGG_OPUS


class SpeechError(HermesError):
    """The speech endpoint failed (down, refused, or gave audio that could not be made OGG/Opus)."""


class SpeechSynthesizer(Protocol):
    async def synthesize(self, text: str) -> Speech:
        """Speak `text` (plain text, already within the length limit); raises `SpeechError`."""
        ...
