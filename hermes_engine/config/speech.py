"""Voice replies' settings: the speech endpoint (the environment's `HERMES_TTS_*`) and a profile's `tts:`.

The endpoint is any OpenAI-compatible `/v1/audio/speech` server; `HERMES_TTS_MODEL` turns it on, and the base
URL and key default to the OpenAI ones (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, as the `openai` SDK reads them).
A profile decides whether its bot may speak at all and whether a conversation starts with voice on.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["SpeechSettings", "TtsProfile"]


class SpeechSettings(BaseSettings):
    """`HERMES_TTS_MODEL` (none: no speech), `HERMES_TTS_VOICE`, `HERMES_TTS_BASE_URL`, `HERMES_TTS_API_KEY`."""

    model_config = SettingsConfigDict(env_prefix="HERMES_TTS_", extra="ignore")

    model: str | None = None
    voice: str = "alloy"
    base_url: str | None = None  # None: the SDK's own (OPENAI_BASE_URL, else OpenAI)
    api_key: str | None = None  # None: OPENAI_API_KEY
    timeout_seconds: float = Field(default=60.0, gt=0)

    @property
    def configured(self) -> bool:
        return bool(self.model)


class TtsProfile(BaseModel):
    """A profile's `tts:`. Off by default; `enabled: true` lets `/voice on` turn voice replies on in a
    conversation, `default_on: true` makes that the start of every conversation. An answer longer than
    `max_chars` is spoken up to its last sentence end within the limit (the whole text is still sent)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    default_on: bool = False
    max_chars: int = Field(default=1000, ge=50, le=4096)  # 4096: the OpenAI endpoint's own input limit
