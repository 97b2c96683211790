"""What skill hints embed, and how vectors are compared (the `Embedder` itself is in `ports/embedding.py`).

A skill is embedded as the text that says when it
applies (name, description, "When to use", triggers); the hash of that text keys the stored vector, so a
changed skill is embedded again and an unchanged one never is.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from hermes_engine.skills.model import Skill

MAX_DOCUMENT_CHARS = 2000


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


__all__ = ["content_hash", "cosine", "skill_document"]
