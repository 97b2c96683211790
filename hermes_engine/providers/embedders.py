"""Which `Embedder` serves skill hints, from the settings. The SDK or model behind it is imported only when
one is configured, so a bot without embeddings loads neither `openai` nor a local model.
"""

from __future__ import annotations

from hermes_engine.ports.embedding import Embedder
from hermes_engine.providers.registry import read_env


def embedder_from_settings(model: str | None, base_url: str | None = None) -> Embedder | None:
    """The configured embedder, or None when no embedding model is set (hints stay lexical).

    `wordllama` is the in-process model whose weights ship with its package (the `local-embeddings` extra);
    any other name is asked of an OpenAI-compatible `/v1/embeddings`. Its key: HERMES_EMBEDDING_API_KEY, else
    OPENAI_COMPATIBLE_API_KEY / OPENAI_API_KEY; its base URL, when not given, OPENAI_COMPATIBLE_BASE_URL, else
    the SDK's own (OPENAI_BASE_URL)."""
    if not model:
        return None
    if model == "wordllama":
        from hermes_engine.providers.wordllama_embeddings import WordLlamaEmbedder

        return WordLlamaEmbedder()
    from hermes_engine.providers.openai_embeddings import OpenAIEmbedder

    key = read_env("HERMES_EMBEDDING_API_KEY") or read_env("OPENAI_COMPATIBLE_API_KEY") or read_env("OPENAI_API_KEY")
    return OpenAIEmbedder(model, base_url=base_url or read_env("OPENAI_COMPATIBLE_BASE_URL"), api_key=key)


__all__ = ["embedder_from_settings"]
