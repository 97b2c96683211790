"""How the engine hears a voice note: a `Transcriber` turns an audio file into words. The engine owns the
contract; `providers/openai_transcriber.py` implements it on any OpenAI-compatible
`/v1/audio/transcriptions` endpoint (OpenAI, Groq, a local whisper server)."""

from __future__ import annotations

from typing import Protocol


class TranscriptionFailed(Exception):
    """The endpoint could not transcribe the file (down, 429 after its retry, a refusal). The message is
    short and free of secrets: the person is told it."""


class Transcriber(Protocol):
    @property
    def model(self) -> str: ...

    async def transcribe(self, path: str, file_name: str, mime_type: str) -> str:
        """The words spoken in the audio file at `path`. Raises `TranscriptionFailed`."""
        ...
