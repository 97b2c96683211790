"""The `SkillEmbeddingCache` role (migration 0005): skill embedding vectors by (model, content hash).

Vectors are written once and never updated: a changed skill has a new hash, so its old row is simply no
longer asked for. Inserts ignore a row another replica wrote first.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from storage.models import SkillEmbeddingRow
from storage.repos.base import SqlRepository, whole

__all__ = ["EmbeddingRepository"]


class EmbeddingRepository(SqlRepository):
    """`hermes_engine.ports.storage.SkillEmbeddingCache`."""

    @whole
    async def get_skill_embeddings(self, model: str, hashes: Sequence[str]) -> dict[str, list[float]]:
        if not hashes:
            return {}
        async with self._session() as session:
            rows = (await session.execute(
                sa.select(SkillEmbeddingRow.content_hash, SkillEmbeddingRow.vector)
                .where(SkillEmbeddingRow.model == model, SkillEmbeddingRow.content_hash.in_(list(hashes))))).all()
        return {row.content_hash: [float(v) for v in row.vector] for row in rows}

    @whole
    async def put_skill_embeddings(self, model: str, vectors: dict[str, list[float]]) -> None:
        if not vectors:
            return
        insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        now = self._now()
        rows = [{"model": model, "content_hash": h, "vector": list(v), "created_at": now} for h, v in vectors.items()]
        async with self._session() as session, session.begin():
            await session.execute(insert(SkillEmbeddingRow).values(rows).on_conflict_do_nothing(
                index_elements=["model", "content_hash"]))
