"""Full-text search over stored conversations and the list of sessions an export covers: the `SearchIndex`
role (migration 0002).

    hits = await search(engine, person_id=2, bot="mybot", query="invoice numbers", limit=5)

Search scope (the privacy rule, enforced in SQL, not by the caller): a person finds
- their own user messages, never anyone else's;
- assistant messages and the latest compaction summary of sessions they took part in — a person "took
  part" in a session when they authored a user message in it (a DM belongs to its owner, who is the only
  one writing in it), so a group's conversation is never shown to someone who was not in it;
- within one bot. Tool output is not searchable.

SQLite uses the FTS5 tables the migration keeps in step with triggers (bm25 rank, `snippet()`);
PostgreSQL uses `to_tsvector('english', …)` against the migration's GIN indexes (`ts_rank_cd`,
`ts_headline`). Queries are reduced to words first, so nothing a person types is a syntax error; all words
must match, and when that finds nothing any word may.

Like every store call, each runs to completion even when its caller is cancelled.
"""

from __future__ import annotations

import re
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from hermes_engine.ports.storage import SearchHit
from storage.models import MessageRow, table_of
from storage.repos.base import SqlRepository, whole_call
from storage.values import utc

__all__ = ["MAX_QUERY_WORDS", "SNIPPET_WORDS", "SearchRepository", "export_session_ids", "query_words", "search"]

messages = table_of(MessageRow)

MAX_QUERY_WORDS = 12
SNIPPET_WORDS = 16
_WORD = re.compile(r"\w+", re.UNICODE)


def query_words(query: str) -> list[str]:
    """The words of a free-text query (deduplicated, at most MAX_QUERY_WORDS)."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:MAX_QUERY_WORDS]


def _member_sessions() -> str:
    return "(SELECT DISTINCT session_id FROM messages WHERE person_id = :person AND role = 'user')"


def _latest_summaries() -> str:
    return "(SELECT max(id) FROM compactions GROUP BY session_id)"


_SQLITE_MESSAGES = f"""
SELECT m.id AS id, m.session_id AS session_id, m.role AS role, m.created_at AS created_at,
       snippet(messages_fts, 0, '«', '»', '…', {SNIPPET_WORDS}) AS snippet, -bm25(messages_fts) AS score
FROM messages_fts
JOIN messages m ON m.id = messages_fts.rowid
JOIN sessions s ON s.id = m.session_id
WHERE messages_fts MATCH :match AND s.bot = :bot
  AND ((m.role = 'user' AND m.person_id = :person)
       OR (m.role = 'assistant' AND m.session_id IN {_member_sessions()}))
ORDER BY bm25(messages_fts) LIMIT :limit
"""

_SQLITE_SUMMARIES = f"""
SELECT c.id AS id, c.session_id AS session_id, 'summary' AS role, c.created_at AS created_at,
       snippet(compactions_fts, 0, '«', '»', '…', {SNIPPET_WORDS}) AS snippet, -bm25(compactions_fts) AS score
FROM compactions_fts
JOIN compactions c ON c.id = compactions_fts.rowid
JOIN sessions s ON s.id = c.session_id
WHERE compactions_fts MATCH :match AND s.bot = :bot
  AND c.id IN {_latest_summaries()} AND c.session_id IN {_member_sessions()}
ORDER BY bm25(compactions_fts) LIMIT :limit
"""

_PG_HEADLINE = f"'StartSel=«, StopSel=», MaxWords={SNIPPET_WORDS * 2}, MinWords={SNIPPET_WORDS // 2}, ShortWord=2'"

# The query is written inline (not joined from a CTE) so the planner can use the GIN indexes of 0002.
_PG_QUERY = "websearch_to_tsquery('english'::regconfig, :match)"

_PG_MESSAGES = f"""
SELECT hits.id, hits.session_id, hits.role, hits.created_at, hits.score,
       ts_headline('english'::regconfig, hits.content, {_PG_QUERY}, {_PG_HEADLINE}) AS snippet
FROM (
  SELECT m.id, m.session_id, m.role, m.created_at, m.content,
         ts_rank_cd(to_tsvector('english'::regconfig, m.content), {_PG_QUERY}) AS score
  FROM messages m
  JOIN sessions s ON s.id = m.session_id
  WHERE to_tsvector('english'::regconfig, m.content) @@ {_PG_QUERY} AND m.role IN ('user', 'assistant')
    AND s.bot = :bot
    AND ((m.role = 'user' AND m.person_id = :person)
         OR (m.role = 'assistant' AND m.session_id IN {_member_sessions()}))
  ORDER BY score DESC, m.id DESC LIMIT :limit
) AS hits ORDER BY hits.score DESC, hits.id DESC
"""

_PG_SUMMARIES = f"""
SELECT hits.id, hits.session_id, hits.role, hits.created_at, hits.score,
       ts_headline('english'::regconfig, hits.summary, {_PG_QUERY}, {_PG_HEADLINE}) AS snippet
FROM (
  SELECT c.id, c.session_id, 'summary' AS role, c.created_at, c.summary,
         ts_rank_cd(to_tsvector('english'::regconfig, c.summary), {_PG_QUERY}) AS score
  FROM compactions c
  JOIN sessions s ON s.id = c.session_id
  WHERE to_tsvector('english'::regconfig, c.summary) @@ {_PG_QUERY} AND s.bot = :bot
    AND c.id IN {_latest_summaries()} AND c.session_id IN {_member_sessions()}
  ORDER BY score DESC, c.id DESC LIMIT :limit
) AS hits ORDER BY hits.score DESC, hits.id DESC
"""


def _match_expression(dialect: str, words: list[str], any_word: bool) -> str:
    if dialect == "sqlite":
        return (" OR " if any_word else " ").join(f'"{w}"' for w in words)
    return (" or " if any_word else " ").join(words)  # websearch_to_tsquery syntax


@whole_call
async def search(engine: AsyncEngine, *, person_id: int, bot: str, query: str, limit: int = 5) -> list[SearchHit]:
    """Ranked hits for `query` within what `person_id` may see (see the module docstring)."""
    words = query_words(query)
    if not words or limit < 1:
        return []
    dialect = engine.dialect.name
    if dialect == "sqlite":
        statements = (_SQLITE_MESSAGES, _SQLITE_SUMMARIES)
    elif dialect == "postgresql":
        statements = (_PG_MESSAGES, _PG_SUMMARIES)
    else:  # pragma: no cover - SqlStore refuses other databases
        raise ValueError(f"search is not available on {dialect}")
    hits: list[SearchHit] = []
    async with engine.connect() as conn:
        for any_word in (False, True):
            if any_word and (hits or len(words) == 1):
                break
            params = {"match": _match_expression(dialect, words, any_word), "bot": bot, "person": person_id,
                      "limit": limit}
            for statement, kind in zip(statements, ("message", "summary"), strict=True):
                for row in await conn.execute(sa.text(statement), params):
                    hits.append(SearchHit(kind=kind, id=row.id, session_id=row.session_id, role=row.role,
                                          snippet=" ".join((row.snippet or "").split()),
                                          created_at=utc(row.created_at), score=float(row.score or 0.0)))
    hits.sort(key=lambda h: (-h.score, -h.id))
    return hits[:limit]


@whole_call
async def export_session_ids(engine: AsyncEngine, *, since: datetime | None = None,
                             person_id: int | None = None) -> list[int]:
    """Sessions with at least one message at or after `since`, and (with `person_id`) in which that person
    authored a user message; oldest first."""
    stmt = sa.select(messages.c.session_id).distinct()
    if since is not None:
        stmt = stmt.where(messages.c.created_at >= since)
    if person_id is not None:
        member = (sa.select(messages.c.session_id)
                  .where(messages.c.person_id == person_id, messages.c.role == "user"))
        stmt = stmt.where(messages.c.session_id.in_(member))
    async with engine.connect() as conn:
        return sorted(row[0] for row in await conn.execute(stmt))


class SearchRepository(SqlRepository):
    """`hermes_engine.ports.storage.SearchIndex`, on the store's engine."""

    async def search_messages(self, *, person_id: int, bot: str, query: str, limit: int = 5) -> list[SearchHit]:
        return await search(self.engine, person_id=person_id, bot=bot, query=query, limit=limit)

    async def export_session_ids(self, *, since: datetime | None = None,
                                 person_id: int | None = None) -> list[int]:
        return await export_session_ids(self.engine, since=since, person_id=person_id)
