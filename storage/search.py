"""Compaction lineage and full-text search, on the engine of a `storage.store.SqlStore` (migration 0002).

    engine = store.engine
    record = await record_compaction(engine, session_id=7, first_message_id=3, last_message_id=40, ...)
    latest = await latest_compaction(engine, 7)
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

Like `SqlStore`, every call runs to completion even when its caller is cancelled.
"""

from __future__ import annotations

import asyncio
import functools
import re
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Sequence, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from hermes_engine.ports.storage import CompactionRecord, MessageRef, SearchHit
from storage.models import CompactionRow, MessageRow, SessionRow

__all__ = ["CompactionRecord", "MessageRef", "SearchHit", "compactions", "export_session_ids",
           "latest_compaction", "list_compactions", "message_refs_after", "record_compaction", "search"]

compactions = CompactionRow.__table__
messages = MessageRow.__table__
sessions = SessionRow.__table__

MAX_QUERY_WORDS = 12
SNIPPET_WORDS = 16
_WORD = re.compile(r"\w+", re.UNICODE)


_T = TypeVar("_T")


def _whole(fn: Callable[..., Awaitable[_T]]) -> Callable[..., Awaitable[_T]]:
    """Run the call to completion even if the caller is cancelled (see `storage.store._whole`)."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> _T:
        return await asyncio.shield(asyncio.ensure_future(fn(*args, **kwargs)))

    return wrapper


def _utc(value: Any) -> datetime:
    if isinstance(value, str):  # raw SQL on SQLite hands back the stored text
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def _compaction(row: Any) -> CompactionRecord:
    return CompactionRecord(id=row.id, session_id=row.session_id, parent_id=row.parent_id,
                            first_message_id=row.first_message_id, last_message_id=row.last_message_id,
                            summary=row.summary, reason=row.reason, tokens_before=row.tokens_before,
                            tokens_after=row.tokens_after, created_at=_utc(row.created_at))


# ------------------------------------------------------------------------------------------- lineage

@_whole
async def record_compaction(engine: AsyncEngine, *, session_id: int, first_message_id: int,
                            last_message_id: int, summary: str, tokens_before: int, tokens_after: int,
                            parent_id: int | None = None, reason: str = "agent",
                            now: datetime | None = None) -> CompactionRecord:
    values = dict(session_id=session_id, parent_id=parent_id, first_message_id=first_message_id,
                  last_message_id=last_message_id, summary=summary.replace("\x00", "\ufffd"), reason=reason,
                  tokens_before=tokens_before, tokens_after=tokens_after,
                  created_at=now or datetime.now(timezone.utc))
    async with engine.begin() as conn:
        row = (await conn.execute(compactions.insert().values(**values).returning(*compactions.c))).one()
    return _compaction(row)


@_whole
async def latest_compaction(engine: AsyncEngine, session_id: int) -> CompactionRecord | None:
    async with engine.connect() as conn:
        row = (await conn.execute(sa.select(compactions).where(compactions.c.session_id == session_id)
                                  .order_by(compactions.c.id.desc()).limit(1))).first()
    return _compaction(row) if row is not None else None


@_whole
async def list_compactions(engine: AsyncEngine, session_ids: Sequence[int] | None = None) -> list[CompactionRecord]:
    """Compactions, oldest first (all, or of the given sessions)."""
    stmt = sa.select(compactions).order_by(compactions.c.id)
    if session_ids is not None:
        stmt = stmt.where(compactions.c.session_id.in_(list(session_ids)))
    async with engine.connect() as conn:
        return [_compaction(row) for row in await conn.execute(stmt)]


@_whole
async def message_refs_after(engine: AsyncEngine, session_id: int, after_id: int) -> list[MessageRef]:
    """The session's stored messages with an id above `after_id`, in order."""
    stmt = (sa.select(messages.c.id, messages.c.role, messages.c.content, messages.c.tool_call_id, messages.c.meta)
            .where(messages.c.session_id == session_id, messages.c.id > after_id).order_by(messages.c.id))
    async with engine.connect() as conn:
        rows = (await conn.execute(stmt)).all()
    return [MessageRef(r.id, r.role, r.content, r.tool_call_id, (r.meta or {}).get("event_id")) for r in rows]


# -------------------------------------------------------------------------------------------- search

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


@_whole
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
            for statement, kind in zip(statements, ("message", "summary")):
                for row in await conn.execute(sa.text(statement), params):
                    hits.append(SearchHit(kind=kind, id=row.id, session_id=row.session_id, role=row.role,
                                          snippet=" ".join((row.snippet or "").split()),
                                          created_at=_utc(row.created_at), score=float(row.score or 0.0)))
    hits.sort(key=lambda h: (-h.score, -h.id))
    return hits[:limit]


# -------------------------------------------------------------------------------------------- export

@_whole
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
