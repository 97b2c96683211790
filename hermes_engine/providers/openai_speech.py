"""The `SpeechSynthesizer` port over an OpenAI-compatible `/v1/audio/speech` endpoint (OpenAI, a local TTS
server, a proxy), through the `openai` SDK's `client.audio.speech`.

It asks for `opus` (OGG/Opus); whatever else comes back is transcoded (`opus.py`). One retry and a bounded
timeout: a reply's voice follows its text, and a slow endpoint must not hold anything up for long. Every
failure becomes `SpeechError`, its message redacted.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import openai

from hermes_engine.config.speech import SpeechSettings
from hermes_engine.ports.speech import Speech, SpeechError
from hermes_engine.providers.opus import as_ogg_opus
from hermes_engine.secrets import redact

__all__ = ["OpenAISpeech", "speech_from_settings"]

PLACEHOLDER_API_KEY = "not-needed"  # local servers accept any key; the SDK insists on one


class OpenAISpeech:
    """`SpeechSynthesizer` for `/v1/audio/speech`."""

    def __init__(self, model: str, voice: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, max_retries: int = 1) -> None:
        self.model, self.voice = model, voice
        options: dict[str, Any] = {"timeout": timeout, "max_retries": max_retries,
                                   "api_key": api_key or os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_API_KEY}
        if base_url:
            options["base_url"] = base_url
        self._client = openai.AsyncOpenAI(**options)

    async def synthesize(self, text: str) -> Speech:
        try:
            response = await self._client.audio.speech.create(model=self.model, voice=self.voice, input=text,
                                                              response_format="opus")
            data = await response.aread()
        except openai.OpenAIError as exc:
            raise SpeechError(redact(f"The speech endpoint failed: {exc}")) from None
        if not data:
            raise SpeechError("The speech endpoint answered with no audio.")
        return await asyncio.to_thread(as_ogg_opus, data)  # FFmpeg's work off the loop


def speech_from_settings(settings: SpeechSettings) -> OpenAISpeech | None:
    """The synthesizer `HERMES_TTS_*` describe, or None when `HERMES_TTS_MODEL` is unset."""
    if not settings.model:
        return None
    return OpenAISpeech(settings.model, settings.voice, base_url=settings.base_url, api_key=settings.api_key,
                        timeout=settings.timeout_seconds)
