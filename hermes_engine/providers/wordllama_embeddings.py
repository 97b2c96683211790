"""The `Embedder` seam over WordLlama: a small static embedding model (256 dimensions, 16 MB) whose
weights ship inside its PyPI wheel, so it runs on a machine with no model hub, no GPU and no server.

The package looks for its bundled tokenizer under the wrong folder name and would then try to download it,
so it is pointed at its own folder as the cache and downloads are turned off: nothing is fetched, ever.
Embedding is CPU work; it runs in a thread so a turn's event loop is not held.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hermes_engine.ports.embedding import EmbeddingError, check_vectors

MODEL = "wordllama-l2-supercat-256"
_lock = threading.Lock()
_loaded: Any = None


def _model() -> Any:
    global _loaded
    with _lock:
        if _loaded is None:
            try:
                import wordllama
                from wordllama import WordLlama
            except ImportError as exc:
                raise EmbeddingError(f"wordllama is not installed ({exc}); pip install 'hermes-gateway[local-"
                                     f"embeddings]' or unset HERMES_EMBEDDING_MODEL") from None
            try:
                _loaded = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
            except (OSError, ValueError) as exc:
                raise EmbeddingError(f"the bundled WordLlama model could not be loaded: {exc}") from None
        return _loaded


class WordLlamaEmbedder:
    """`hermes_engine.skills.embeddings.Embedder`, in process."""

    @property
    def model(self) -> str:
        return MODEL

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = _model().embed(list(texts), norm=True)
        return check_vectors([[float(x) for x in row] for row in vectors], len(texts))

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_sync, texts)


__all__ = ["MODEL", "WordLlamaEmbedder"]
