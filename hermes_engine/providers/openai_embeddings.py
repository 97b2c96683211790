"""The `Embedder` seam over an OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, vLLM, llama.cpp,
Ollama, proxies), through the `openai` SDK.

Hints run inside a turn, so the client gives up fast (one retry, a short timeout) and every failure becomes
`EmbeddingError`: the caller then falls back to lexical hints for that turn.
"""

from __future__ import annotations

from collections.abc import Sequence

import openai

from hermes_engine.ports.embedding import EmbeddingError, check_vectors
from hermes_engine.providers.openai_client import openai_client
from hermes_engine.secrets import redact

BATCH = 64


class OpenAIEmbedder:
    """`hermes_engine.skills.embeddings.Embedder` for `/v1/embeddings`."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 10.0, max_retries: int = 1) -> None:
        self._model = model
        self._client = openai_client(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)

    @property
    def model(self) -> str:
        return self._model

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            batch = list(texts[start:start + BATCH])
            try:
                response = await self._client.embeddings.create(model=self._model, input=batch)
                data = sorted(response.data, key=lambda d: d.index)
                vectors += check_vectors([d.embedding for d in data], len(batch))
            except EmbeddingError:
                raise
            except (openai.OpenAIError, AttributeError, TypeError, ValueError) as exc:
                raise EmbeddingError(f"embedding call failed: {redact(str(exc))[:200]}") from None
        return vectors

    async def close(self) -> None:
        await self._client.close()


__all__ = ["OpenAIEmbedder"]
