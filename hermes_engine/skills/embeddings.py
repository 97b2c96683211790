"""What skill hints need from an embedding model, and the helpers around it.

`Embedder` is the seam: the OpenAI-compatible `/v1/embeddings` client (`providers/openai_embeddings.py`)
implements it for hosted models and local servers alike. A skill is embedded as the text that says when it
applies (name, description, "When to use", triggers); the hash of that text keys the stored vector, so a
changed skill is embedded again and an unchanged one never is.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Protocol

from hermes_engine.errors import HermesError
from hermes_engine.skills.model import Skill

MAX_DOCUMENT_CHARS = 2000


class EmbeddingError(HermesError):
    """The embedding model did not answer with usable vectors (HTTP error, timeout, malformed body)."""


class Embedder(Protocol):
    """An embedding model. The skills side owns this contract; providers implement it."""

    @property
    def model(self) -> str:
        """The model's name: part of the cache key, so switching models never mixes vectors."""

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order. Raises `EmbeddingError` on any failure."""


def skill_document(skill: Skill) -> str:
    """The text embedded for `skill`: what it is and when it applies."""
    parts = [skill.name.replace("-", " ") + ": " + skill.description, skill.when_to_use.strip()]
    if skill.triggers:
        parts.append("Requests like: " + "; ".join(skill.triggers))
    return "\n".join(p for p in parts if p)[:MAX_DOCUMENT_CHARS]


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


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


__all__ = ["Embedder", "EmbeddingError", "check_vectors", "content_hash", "cosine", "skill_document"]
