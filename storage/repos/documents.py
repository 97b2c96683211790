"""The `DocumentStore` role (migration 0008): versioned text documents by (area, path).

Every write is one statement that compares and sets the version, so two replicas racing on one document
cannot both win: the first insert or the update that still sees the version it read lands, the other
writes nothing and is told so.
"""

from __future__ import annotations

import sqlalchemy as sa

from hermes_engine.ports.storage import StoredDocument
from storage.models import DocumentRow, table_of
from storage.repos.base import SqlRepository, whole

__all__ = ["DocumentRepository"]


class DocumentRepository(SqlRepository):
    """`hermes_engine.ports.storage.DocumentStore`."""

    @whole
    async def get_document(self, area: str, path: str) -> StoredDocument | None:
        table = table_of(DocumentRow)
        async with self.single_engine.connect() as conn:
            row = (await conn.execute(sa.select(table.c.body, table.c.version, table.c.updated_at)
                                      .where(table.c.area == area, table.c.path == path))).first()
        return None if row is None else StoredDocument(row.body, row.version, row.updated_at)

    @whole
    async def put_document(self, area: str, path: str, text: str, *, expected_version: int) -> int | None:
        if expected_version < 0:
            raise ValueError("expected_version must be 0 (a new document) or a version that was read")
        table = table_of(DocumentRow)
        now = self._now()
        if expected_version == 0:
            stmt = (self._insert(table).values(area=area, path=path, body=text, version=1, updated_at=now)
                    .on_conflict_do_nothing(index_elements=["area", "path"]).returning(table.c.version))
        else:
            stmt = (sa.update(table)
                    .where(table.c.area == area, table.c.path == path, table.c.version == expected_version)
                    .values(body=text, version=table.c.version + 1, updated_at=now).returning(table.c.version))
        async with self.engine.begin() as conn:
            row = (await conn.execute(stmt)).first()
        return None if row is None else int(row.version)

    @whole
    async def read_documents(self, area: str, prefix: str = "") -> dict[str, StoredDocument]:
        table = table_of(DocumentRow)
        query = sa.select(table.c.path, table.c.body, table.c.version, table.c.updated_at).where(table.c.area == area)
        if prefix:
            query = query.where(table.c.path.startswith(prefix, autoescape=True))
        async with self.engine.connect() as conn:
            return {row.path: StoredDocument(row.body, row.version, row.updated_at)
                    for row in await conn.execute(query)}

    @whole
    async def delete_documents(self, area: str, prefix: str) -> int:
        if not prefix:
            raise ValueError("delete_documents needs a path or a folder prefix ending with '/'")
        table = table_of(DocumentRow)
        which = (table.c.path.startswith(prefix, autoescape=True) if prefix.endswith("/")
                 else table.c.path == prefix)
        async with self.engine.begin() as conn:
            result = await conn.execute(sa.delete(table).where(table.c.area == area, which))
        return int(result.rowcount or 0)
