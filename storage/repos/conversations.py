"""The `ConversationBrowser` role: what the dashboard reads of conversations and goals, a page at a time.

Sessions are listed by their last activity: one grouped pass over the messages' (session, id) index joined to
the sessions, then the page's newest messages' times and its writers in two more queries. Search reads the
full-text index of migration 0002 as `storage.repos.search` does (FTS5 on SQLite, the GIN indexes on
PostgreSQL) with the admin's scope: every conversation of the bots named, the latest summary of each session,
never tool output.
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

# Ranked first, the snippets made after for the page alone: `snippet()` costs more than ranking, and a common
# word matches most of the messages.
_SQLITE_SEARCH = """
SELECT kind, id, session_id, role, created_at, score FROM (
  SELECT 'message' AS kind, m.id AS id, m.session_id AS session_id, m.role AS role, m.created_at AS created_at,
         -bm25(messages_fts) AS score
  FROM messages_fts
  JOIN messages m ON m.id = messages_fts.rowid
  JOIN sessions s ON s.id = m.session_id
  WHERE messages_fts MATCH :match AND s.bot IN :bots
  UNION ALL
  SELECT 'summary', c.id, c.session_id, 'summary', c.created_at, -bm25(compactions_fts)
  FROM compactions_fts
  JOIN compactions c ON c.id = compactions_fts.rowid
  JOIN sessions s ON s.id = c.session_id
  WHERE compactions_fts MATCH :match AND s.bot IN :bots
    AND c.id IN (SELECT max(id) FROM compactions GROUP BY session_id)
) ORDER BY score DESC, id DESC LIMIT :limit OFFSET :offset
"""

_SQLITE_SNIPPETS = {
    kind: f"SELECT rowid AS id, snippet({table}, 0, '«', '»', '…', {SNIPPET_WORDS}) AS snippet FROM {table} "
          f"WHERE {table} MATCH :match AND rowid IN :ids"
    for kind, table in (("message", "messages_fts"), ("summary", "compactions_fts"))
}

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


def _activity(of: Any = None) -> Any:
    """Per session with messages (of the sessions `of` selects, else all): its newest message and how many it
    holds, read off the (session, id) index."""
    stmt = sa.select(messages.c.session_id, sa.func.max(messages.c.id).label("last_id"), sa.func.count().label("n"))
    if of is not None:
        stmt = stmt.where(messages.c.session_id.in_(of))
    return stmt.group_by(messages.c.session_id).subquery("activity")


def _listing(where: Any, *, few: bool = False) -> tuple[Any, Any]:
    """The sessions matching `where` with their activity, and the key they sort by (newest message first:
    ids grow with time; sessions no one wrote in yet last). `few`: `where` picks a handful of sessions, so only
    their messages are counted, not every session's."""
    activity = _activity(sa.select(sessions.c.id).where(where) if few else None)
    stmt = (sa.select(sessions.c.id, sessions.c.bot, sessions.c.key, sessions.c.parent_id, sessions.c.created_at,
                      activity.c.last_id, sa.func.coalesce(activity.c.n, 0).label("n"))
            .select_from(sessions.outerjoin(activity, activity.c.session_id == sessions.c.id))
            .where(where))
    return stmt, sa.func.coalesce(activity.c.last_id, 0)


async def _sqlite_snippets(conn: Any, match: str, rows: Sequence[Any]) -> dict[tuple[str, int], str]:
    """The snippets of the page's hits, by (kind, id): one query for messages, one for summaries."""
    snippets: dict[tuple[str, int], str] = {}
    for kind, query_text in _SQLITE_SNIPPETS.items():
        ids = [row.id for row in rows if row.kind == kind]
        if ids:
            statement = sa.text(query_text).bindparams(sa.bindparam("ids", expanding=True))
            for found in await conn.execute(statement, {"match": match, "ids": ids}):
                snippets[kind, found.id] = found.snippet or ""
    return {(row.kind, row.id): snippets.get((row.kind, row.id), "") for row in rows}


class ConversationRepository(SqlRepository):
    """`hermes_engine.ports.conversations.ConversationBrowser`."""

    async def _listed(self, conn: Any, stmt: Any) -> list[ListedSession]:
        """The rows of `_listing`'s `stmt` as listed sessions: two more queries, for the page's rows alone."""
        rows = (await conn.execute(stmt)).all()
        writers: dict[int, list[tuple[int, str]]] = {}
        last_at: dict[int, Any] = {}
        if rows:
            newest = [row.last_id for row in rows if row.last_id is not None]
            if newest:
                when = sa.select(messages.c.id, messages.c.created_at).where(messages.c.id.in_(newest))
                last_at = {id_: created for id_, created in (await conn.execute(when)).all()}
            first = sa.func.min(messages.c.id)
            query = (sa.select(messages.c.session_id, people.c.id, people.c.display_name)
                     .select_from(messages.join(people, people.c.id == messages.c.person_id))
                     .where(messages.c.session_id.in_([row.id for row in rows]), messages.c.role == "user")
                     .group_by(messages.c.session_id, people.c.id, people.c.display_name).order_by(first))
            for session_id, person_id, name in (await conn.execute(query)).all():
                writers.setdefault(session_id, []).append((person_id, name))
        return [ListedSession(row.id, row.bot, row.key, row.parent_id, utc(row.created_at),
                              utc(last_at.get(row.last_id, row.created_at)), int(row.n),
                              tuple(writers.get(row.id, ()))) for row in rows]

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
        stmt, _ = _listing(sessions.c.id.in_(list(session_ids)), few=True)
        async with self.engine.connect() as conn:
            found = {listed.id: listed for listed in await self._listed(conn, stmt)}
        return [found[i] for i in dict.fromkeys(session_ids) if i in found]

    @whole
    async def session_children(self, session_id: int, *, limit: int = 50) -> list[ListedSession]:
        stmt, _ = _listing(sessions.c.parent_id == session_id, few=True)
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
        match = _match_expression(self.dialect, words, any_word)
        params = {"match": match, "bots": list(bots), "limit": limit, "offset": max(offset, 0)}
        async with self.engine.connect() as conn:
            rows = (await conn.execute(statement, params)).all()
            snippets = await _sqlite_snippets(conn, match, rows) if self.dialect == "sqlite" else {}
        hits = []
        for row in rows:
            text = snippets[row.kind, row.id] if self.dialect == "sqlite" else row.snippet
            hits.append(SearchHit(kind=row.kind, id=row.id, session_id=row.session_id, role=row.role,
                                  snippet=" ".join((text or "").split()), created_at=utc(row.created_at),
                                  score=float(row.score or 0.0)))
        return hits

    @whole
    async def browse_goals(self, *, bots: Sequence[str], offset: int, limit: int) -> tuple[list[GoalRecord], int]:
        ours = GoalRow.bot.in_(list(bots))
        open_first = sa.case((GoalRow.status.in_(OPEN_GOAL_STATUSES), 0), else_=1)
        async with self._session() as session:
            total = (await session.execute(sa.select(sa.func.count()).select_from(GoalRow).where(ours))).scalar_one()
            rows = await session.scalars(sa.select(GoalRow).where(ours).order_by(open_first, GoalRow.id.desc())
                                         .offset(max(offset, 0)).limit(max(limit, 0)))
            return [_goal(row) for row in rows], int(total)
