"""The `Transcriber` over an OpenAI-compatible `/v1/audio/transcriptions` endpoint, through the `openai`
SDK's audio API, so OpenAI, Groq or a local whisper server all work.

It runs before a turn can start, so the SDK retries once (a 429 or 5xx, a dropped connection; honouring
`Retry-After`) and then gives up: the person is told and the voice note kept, rather than kept waiting.
"""

from __future__ import annotations

from pathlib import Path

import openai

from hermes_engine.ports.transcription import TranscriptionFailed
from hermes_engine.providers.openai_client import openai_client
from hermes_engine.secrets import redact


class OpenAITranscriber:
    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, max_retries: int = 1) -> None:
        self._model = model
        self._api_key = api_key
        self._client = openai_client(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)

    @property
    def model(self) -> str:
        return self._model

    async def transcribe(self, path: str, file_name: str, mime_type: str) -> str:
        try:
            result = await self._client.audio.transcriptions.create(
                model=self._model, file=(file_name, Path(path), mime_type))
        except openai.APIStatusError as exc:
            raise TranscriptionFailed(f"the transcription service answered {exc.status_code}") from None
        except openai.APITimeoutError:
            raise TranscriptionFailed("the transcription service did not answer in time") from None
        except openai.APIConnectionError:
            raise TranscriptionFailed("the transcription service could not be reached") from None
        except OSError:  # its path is the server's business, not the person's
            raise TranscriptionFailed("the voice note's file could not be read") from None
        except (openai.OpenAIError, ValueError) as exc:
            raise TranscriptionFailed(redact(str(exc), extra=(self._api_key,))[:160]) from None
        text = getattr(result, "text", result)
        return str(text or "").strip()

    async def close(self) -> None:
        await self._client.close()


__all__ = ["OpenAITranscriber"]
