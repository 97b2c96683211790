"""The `ConversationBrowser` role: what the dashboard reads of conversations and goals, a page at a time.

Sessions are listed by their last activity: one grouped pass over the messages' (session, id) index joined to
the page's sessions, then the page's writers in one more query. Search reads the full-text index of migration
0002 as `storage.repos.search` does (FTS5 on SQLite, the GIN indexes on PostgreSQL) with the admin's scope:
every conversation of the bots named, the latest summary of each session, never tool output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from hermes_engine.ports.conversations import ListedSession
from hermes_engine.ports.records import GoalRecord, SearchHit, StoredMessage
from storage.models import OPEN_GOAL_STATUSES, GoalRow, MessageRow, PersonRow, SessionRow, table_of
from storage.repos.base import SqlRepository, whole
from storage.repos.goals import _goal
from storage.repos.search import SNIPPET_WORDS, _match_expression, query_words
from storage.repos.sessions import _message, _usage
from storage.values import utc

__all__ = ["ConversationRepository"]

messages, sessions, people = table_of(MessageRow), table_of(SessionRow), table_of(PersonRow)

_SQLITE_SEARCH = f"""
SELECT kind, id, session_id, role, created_at, snippet, score FROM (
  SELECT 'message' AS kind, m.id AS id, m.session_id AS session_id, m.role AS role, m.created_at AS created_at,
         snippet(messages_fts, 0, '«', '»', '…', {SNIPPET_WORDS}) AS snippet, -bm25(messages_fts) AS score
  FROM messages_fts
  JOIN messages m ON m.id = messages_fts.rowid
  JOIN sessions s ON s.id = m.session_id
  WHERE messages_fts MATCH :match AND s.bot IN :bots
  UNION ALL
  SELECT 'summary', c.id, c.session_id, 'summary', c.created_at,
         snippet(compactions_fts, 0, '«', '»', '…', {SNIPPET_WORDS}), -bm25(compactions_fts)
  FROM compactions_fts
  JOIN compactions c ON c.id = compactions_fts.rowid
  JOIN sessions s ON s.id = c.session_id
  WHERE compactions_fts MATCH :match AND s.bot IN :bots
    AND c.id IN (SELECT max(id) FROM compactions GROUP BY session_id)
) ORDER BY score DESC, id DESC LIMIT :limit OFFSET :offset
"""

_PG_QUERY = "websearch_to_tsquery('english'::regconfig, :match)"
_PG_HEADLINE = f"'StartSel=«, StopSel=», MaxWords={SNIPPET_WORDS * 2}, MinWords={SNIPPET_WORDS // 2}, ShortWord=2'"

_PG_SEARCH = f"""
SELECT hits.kind, hits.id, hits.session_id, hits.role, hits.created_at, hits.score,
       ts_headline('english'::regconfig, hits.body, {_PG_QUERY}, {_PG_HEADLINE}) AS snippet
FROM (
  SELECT 'message' AS kind, m.id, m.session_id, m.role, m.created_at, m.content AS body,
         ts_rank_cd(to_tsvector('english'::regconfig, m.content), {_PG_QUERY}) AS score
  FROM messages m
  JOIN sessions s ON s.id = m.session_id
  WHERE to_tsvector('english'::regconfig, m.content) @@ {_PG_QUERY} AND m.role IN ('user', 'assistant')
    AND s.bot IN :bots
  UNION ALL
  SELECT 'summary', c.id, c.session_id, 'summary', c.created_at, c.summary,
         ts_rank_cd(to_tsvector('english'::regconfig, c.summary), {_PG_QUERY})
  FROM compactions c
  JOIN sessions s ON s.id = c.session_id
  WHERE to_tsvector('english'::regconfig, c.summary) @@ {_PG_QUERY} AND s.bot IN :bots
    AND c.id IN (SELECT max(id) FROM compactions GROUP BY session_id)
  ORDER BY score DESC, id DESC LIMIT :limit OFFSET :offset
) AS hits ORDER BY hits.score DESC, hits.id DESC
"""


def _activity() -> Any:
    """Per session with messages: when it was last written in and how many it holds."""
    return (sa.select(messages.c.session_id, sa.func.max(messages.c.created_at).label("last_at"),
                      sa.func.count().label("n"))
            .group_by(messages.c.session_id).subquery("activity"))


def _listing(where: Any) -> tuple[Any, Any]:
    """The sessions matching `where` with their activity, and the expression they sort by."""
    activity = _activity()
    last = sa.func.coalesce(activity.c.last_at, sessions.c.created_at)
    stmt = (sa.select(sessions.c.id, sessions.c.bot, sessions.c.key, sessions.c.parent_id, sessions.c.created_at,
                      last.label("last_at"), sa.func.coalesce(activity.c.n, 0).label("n"))
            .select_from(sessions.outerjoin(activity, activity.c.session_id == sessions.c.id))
            .where(where))
    return stmt, last


class ConversationRepository(SqlRepository):
    """`hermes_engine.ports.conversations.ConversationBrowser`."""

    async def _listed(self, conn: Any, stmt: Any) -> list[ListedSession]:
        rows = (await conn.execute(stmt)).all()
        writers: dict[int, list[tuple[int, str]]] = {}
        if rows:
            first = sa.func.min(messages.c.id)
            query = (sa.select(messages.c.session_id, people.c.id, people.c.display_name)
                     .select_from(messages.join(people, people.c.id == messages.c.person_id))
                     .where(messages.c.session_id.in_([row.id for row in rows]), messages.c.role == "user")
                     .group_by(messages.c.session_id, people.c.id, people.c.display_name).order_by(first))
            for session_id, person_id, name in (await conn.execute(query)).all():
                writers.setdefault(session_id, []).append((person_id, name))
        return [ListedSession(row.id, row.bot, row.key, row.parent_id, utc(row.created_at), utc(row.last_at),
                              int(row.n), tuple(writers.get(row.id, ()))) for row in rows]

    @whole
    async def browse_sessions(self, *, bots: Sequence[str], offset: int, limit: int) -> tuple[list[ListedSession], int]:
        ours = sessions.c.bot.in_(list(bots))
        stmt, last = _listing(ours)
        async with self.engine.connect() as conn:
            total = (await conn.execute(sa.select(sa.func.count()).select_from(sessions).where(ours))).scalar_one()
            page = await self._listed(conn, stmt.order_by(last.desc(), sessions.c.id.desc())
                                      .offset(max(offset, 0)).limit(max(limit, 0)))
        return page, int(total)

    @whole
    async def listed_sessions(self, session_ids: Sequence[int]) -> list[ListedSession]:
        if not session_ids:
            return []
        stmt, _ = _listing(sessions.c.id.in_(list(session_ids)))
        async with self.engine.connect() as conn:
            found = {listed.id: listed for listed in await self._listed(conn, stmt)}
        return [found[i] for i in dict.fromkeys(session_ids) if i in found]

    @whole
    async def session_children(self, session_id: int, *, limit: int = 50) -> list[ListedSession]:
        stmt, _ = _listing(sessions.c.parent_id == session_id)
        async with self.engine.connect() as conn:
            return await self._listed(conn, stmt.order_by(sessions.c.id).limit(max(limit, 0)))

    @whole
    async def session_messages(self, session_id: int, *, offset: int, limit: int) -> list[StoredMessage]:
        async with self._session() as session:
            rows = await session.scalars(
                sa.select(MessageRow).where(MessageRow.session_id == session_id).order_by(MessageRow.id)
                .offset(max(offset, 0)).limit(max(limit, 0)))
            return [StoredMessage(id=row.id, session_id=row.session_id, person_id=row.person_id,
                                  message=_message(row), usage=_usage(row), model=row.model,
                                  created_at=utc(row.created_at)) for row in rows]

    @whole
    async def search_conversations(self, query: str, *, bots: Sequence[str], any_word: bool = False,
                                   offset: int = 0, limit: int = 20) -> list[SearchHit]:
        words = query_words(query)
        if not words or not bots or limit < 1:
            return []
        statement = sa.text(_SQLITE_SEARCH if self.dialect == "sqlite" else _PG_SEARCH).bindparams(
            sa.bindparam("bots", expanding=True))
        params = {"match": _match_expression(self.dialect, words, any_word), "bots": list(bots),
                  "limit": limit, "offset": max(offset, 0)}
        async with self.engine.connect() as conn:
            rows = (await conn.execute(statement, params)).all()
        return [SearchHit(kind=row.kind, id=row.id, session_id=row.session_id, role=row.role,
                          snippet=" ".join((row.snippet or "").split()), created_at=utc(row.created_at),
                          score=float(row.score or 0.0)) for row in rows]

    @whole
    async def browse_goals(self, *, bots: Sequence[str], offset: int, limit: int) -> tuple[list[GoalRecord], int]:
        ours = GoalRow.bot.in_(list(bots))
        open_first = sa.case((GoalRow.status.in_(OPEN_GOAL_STATUSES), 0), else_=1)
        async with self._session() as session:
            total = (await session.execute(sa.select(sa.func.count()).select_from(GoalRow).where(ours))).scalar_one()
            rows = await session.scalars(sa.select(GoalRow).where(ours).order_by(open_first, GoalRow.id.desc())
                                         .offset(max(offset, 0)).limit(max(limit, 0)))
            return [_goal(row) for row in rows], int(total)
