"""Per-message skill hints: the lexical ranking, fused with embedding similarity when a model is set.

Fusion is reciprocal rank fusion (each ranking adds 1/(K + rank) per skill), which needs no calibration
between BM25 scores and cosines. The lexical ranker still decides how many hints a turn shows and whether
it shows any; similarity adds a skill as relevant only above `min_similarity`. Skill vectors come from the
`SkillEmbeddingCache` (by model and content hash), are embedded when missing, and kept in memory for the
library's revision. Any embedding or cache failure serves that turn's hints lexically, and the following
turns too for `pause` seconds, so an endpoint that is down does not slow every turn by a timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence

from hermes_engine.errors import StorageError
from hermes_engine.ports.embedding import Embedder, EmbeddingError
from hermes_engine.ports.storage import SkillEmbeddingCache
from hermes_engine.skills.embeddings import content_hash, cosine, skill_document
from hermes_engine.skills.index import HintRanker
from hermes_engine.skills.model import Skill
from hermes_engine.skills.ranking import Hit, select_hints

log = logging.getLogger(__name__)

RRF_K = 60


def reciprocal_rank_fusion(rankings: Iterable[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Names by summed 1/(k + rank), best first (ties by name)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, name in enumerate(ranking, start=1):
            scores[name] = scores.get(name, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


class SkillHints:
    """Hints for one library; `rebuild` when the library changes."""

    def __init__(self, skills: Iterable[Skill] = (), *, embedder: Embedder | None = None,
                 cache: SkillEmbeddingCache | None = None, min_similarity: float = 0.5,
                 timeout: float = 15.0, pause: float = 60.0) -> None:
        self.lexical = HintRanker()
        self.embedder = embedder
        self.cache = cache
        self.min_similarity = min_similarity
        self.timeout = timeout
        self.pause = pause
        self._paused_until = 0.0
        self._documents: dict[str, str] = {}  # skill name -> content hash of its embedded text
        self._texts: dict[str, str] = {}  # content hash -> text
        self._vectors: dict[str, list[float]] = {}  # content hash -> vector (this revision's skills)
        self.rebuild(skills)

    def rebuild(self, skills: Iterable[Skill]) -> None:
        skills = list(skills)
        self.lexical.rebuild(skills)
        texts = {s.name: skill_document(s) for s in skills}
        self._documents = {name: content_hash(text) for name, text in texts.items()}
        self._texts = {self._documents[name]: text for name, text in texts.items()}
        self._vectors = {h: v for h, v in self._vectors.items() if h in self._texts}

    async def hints(self, text: str, limit: int = 3) -> list[Hit]:
        ranked = self.lexical.rank(text)
        lexical = select_hints(ranked, limit)
        similarity = await self._try_similarities(text)
        if similarity is None:
            return lexical
        relevant = {h.name for h in ranked if h.relevant}
        relevant |= {n for n, sim in similarity.items() if sim >= self.min_similarity}
        if not relevant:
            return []
        count = min(limit, max(1, len(lexical)))
        return [h for h in self._fuse(ranked, similarity) if h.name in relevant][:count]

    async def rank(self, text: str, limit: int = 0) -> list[Hit]:
        """Every candidate, best first, without the relevance cut (what the benchmark's recall@k reads)."""
        ranked = self.lexical.rank(text)
        similarity = await self._try_similarities(text)
        out = ranked if similarity is None else self._fuse(ranked, similarity)
        return out[:limit] if limit else out

    async def _try_similarities(self, text: str) -> dict[str, float] | None:
        if self.embedder is None or not self._documents or time.monotonic() < self._paused_until:
            return None
        try:
            return await asyncio.wait_for(self._similarities(self.embedder, text), self.timeout)
        except (EmbeddingError, StorageError, TimeoutError) as exc:
            self._paused_until = time.monotonic() + self.pause
            log.warning("skill hints: embeddings unavailable, lexical only for %.0f s (%s)", self.pause, exc)
            return None

    @staticmethod
    def _fuse(ranked: list[Hit], similarity: dict[str, float]) -> list[Hit]:
        by_similarity = sorted(similarity, key=lambda n: (-similarity[n], n))
        lexical_hits = {h.name: h for h in ranked}
        fused = reciprocal_rank_fusion([[h.name for h in ranked], by_similarity])
        return [lexical_hits.get(name, Hit(name, score, ())) for name, score in fused]

    async def _similarities(self, embedder: Embedder, text: str) -> dict[str, float]:
        await self._ensure_vectors(embedder)
        [query] = await embedder.embed([text])
        return {name: cosine(query, self._vectors[h]) for name, h in self._documents.items() if h in self._vectors}

    async def _ensure_vectors(self, embedder: Embedder) -> None:
        missing = [h for h in self._texts if h not in self._vectors]
        if not missing:
            return
        if self.cache is not None:
            self._vectors.update(await self.cache.get_skill_embeddings(embedder.model, missing))
            missing = [h for h in missing if h not in self._vectors]
        if not missing:
            return
        fresh = dict(zip(missing, await embedder.embed([self._texts[h] for h in missing]), strict=True))
        self._vectors.update(fresh)
        if self.cache is not None:
            await self.cache.put_skill_embeddings(embedder.model, fresh)


__all__ = ["RRF_K", "SkillHints", "reciprocal_rank_fusion"]
