"""The embedding seam: skill hints ask an `Embedder`; the providers (`providers/openai_embeddings.py`,
`providers/wordllama_embeddings.py`) implement it, and `check_vectors` is what each answer must pass."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from hermes_engine.errors import HermesError


class EmbeddingError(HermesError):
    """The embedding model did not answer with usable vectors (HTTP error, timeout, malformed body)."""


class Embedder(Protocol):
    """An embedding model. Skill hints ask it; providers implement it."""

    @property
    def model(self) -> str:
        """The model's name: part of the cache key, so switching models never mixes vectors."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order. Raises `EmbeddingError` on any failure."""


def check_vectors(vectors: object, count: int) -> list[list[float]]:
    """`vectors` as `count` equal-length lists of finite floats, or `EmbeddingError`."""
    if not isinstance(vectors, list) or len(vectors) != count:
        raise EmbeddingError(f"expected {count} embedding vectors, got {type(vectors).__name__}")
    out: list[list[float]] = []
    for v in vectors:
        if not isinstance(v, (list, tuple)) or not v or not all(isinstance(x, (int, float)) for x in v):
            raise EmbeddingError("an embedding is not a list of numbers")
        floats = [float(x) for x in v]
        if not all(math.isfinite(x) for x in floats):
            raise EmbeddingError("an embedding holds a non-finite number")
        out.append(floats)
    if len({len(v) for v in out}) > 1:
        raise EmbeddingError("embeddings of different lengths")
    return out
