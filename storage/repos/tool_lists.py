"""The `ToolListStore` role (migration 0008): the tool lists sessions froze, by fingerprint.

A list is written once and never updated (its fingerprint is the hash of its text); an insert ignores a
row another replica or session wrote first.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from storage.models import ToolListRow
from storage.repos.base import SqlRepository, whole

__all__ = ["ToolListRepository"]


class ToolListRepository(SqlRepository):
    """`hermes_engine.ports.storage.ToolListStore`."""

    @whole
    async def get_tool_list(self, fingerprint: str) -> str | None:
        async with self._session() as session:
            return (await session.execute(
                sa.select(ToolListRow.text).where(ToolListRow.fingerprint == fingerprint))).scalar_one_or_none()

    @whole
    async def put_tool_list(self, fingerprint: str, text: str) -> None:
        insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        row = {"fingerprint": fingerprint, "text": text, "created_at": self._now()}
        async with self._single() as session, session.begin():  # one statement
            await session.execute(insert(ToolListRow).values([row]).on_conflict_do_nothing(
                index_elements=["fingerprint"]))
