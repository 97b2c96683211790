"""Settings for what the engine does with files people send: speech to text for voice notes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic_settings import BaseSettings, SettingsConfigDict


class SpeechToText(BaseSettings):
    """`HERMES_STT_MODEL` turns transcription on (e.g. `whisper-1`, `whisper-large-v3` on Groq);
    `HERMES_STT_BASE_URL` (ending in `/v1`) defaults to the OpenAI SDK's own (`OPENAI_BASE_URL`, else OpenAI).
    The key, `HERMES_STT_API_KEY` (else `OPENAI_API_KEY`), is read where the transcriber is made, never kept
    in settings."""

    model_config = SettingsConfigDict(env_prefix="HERMES_STT_", extra="ignore")

    model: str | None = None
    base_url: str | None = None


class VoiceNoteSettings(BaseModel):
    """A profile's `voice_notes:`. `echo`: send the person what was heard before the answer."""

    model_config = ConfigDict(extra="forbid")

    echo: bool = False
