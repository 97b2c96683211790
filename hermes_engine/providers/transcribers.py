"""Which `Transcriber` hears voice notes, from the settings. The SDK is imported only when one is
configured, so a bot without transcription does not load `openai` for it."""

from __future__ import annotations

from hermes_engine.ports.transcription import Transcriber
from hermes_engine.providers.registry import read_env


def transcriber_from_settings(model: str | None, base_url: str | None = None) -> Transcriber | None:
    """The configured transcriber, or None when `HERMES_STT_MODEL` is unset. Its key: `HERMES_STT_API_KEY`,
    else `OPENAI_API_KEY`; its base URL, when not given, the SDK's own (`OPENAI_BASE_URL`, else OpenAI's)."""
    if not model:
        return None
    from hermes_engine.providers.openai_transcriber import OpenAITranscriber

    key = read_env("HERMES_STT_API_KEY") or read_env("OPENAI_API_KEY")
    return OpenAITranscriber(model, base_url=base_url, api_key=key)


__all__ = ["transcriber_from_settings"]
