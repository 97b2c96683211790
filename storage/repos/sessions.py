"""Sessions and their messages: the `SessionStore` role.

Messages are append-only: compression changes the view the model gets, never the stored rows.
`append_messages` (a turn's steps, written together) is a per-message write and goes through
`SqlRepository._hot` (one trip to the SQLite lane, or one statement on the async engine).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from hermes_engine.ports.conversation import Message, Usage
from hermes_engine.ports.storage import NewMessage, SessionRecord, StoredMessage
from storage.models import MessageRow, SessionRow, table_of
from storage.repos.base import LOCK_SESSION_CREATE, SqlRepository, whole
from storage.values import clean, clean_text

__all__ = ["SessionRepository"]

# Built once: constructing a statement costs more than running it on SQLite.
# Ids come in the order of the rows (an id is taken per row as it is inserted), so they are sorted rather
# than asked back in parameter order, which would make SQLAlchemy send one INSERT per row.
_INSERT_MESSAGES = sa.insert(table_of(MessageRow)).returning(table_of(MessageRow).c.id)
# Asked when a session's lane takes its lease (has another replica answered here since?): reads of one
# statement each, so they go the per-message way too, not through an ORM session and the async driver.
_SESSIONS = table_of(SessionRow)
_NEWEST_SESSION = (sa.select(_SESSIONS).where(_SESSIONS.c.bot == sa.bindparam("bot"),
                                               _SESSIONS.c.key == sa.bindparam("key"))
                   .order_by(_SESSIONS.c.id.desc()).limit(1))
_LAST_MESSAGE_ID = (sa.select(sa.func.max(table_of(MessageRow).c.id))
                    .where(table_of(MessageRow).c.session_id == sa.bindparam("session_id")))
_NEWEST_WITH_LAST_MESSAGE = _NEWEST_SESSION.add_columns(
    sa.select(sa.func.max(table_of(MessageRow).c.id))
    .where(table_of(MessageRow).c.session_id == _SESSIONS.c.id).scalar_subquery().label("last_message_id"))


def _row(session_id: int, step: NewMessage, now: datetime) -> dict[str, Any]:
    data, usage = step.message.to_dict(), step.usage
    return {
        "session_id": session_id,
        "person_id": step.person_id,
        "role": data["role"],
        "content": clean_text(data["content"] or ""),
        "tool_calls": clean(data["tool_calls"]) or None,
        "tool_call_id": data["tool_call_id"],
        "tool_name": data["tool_name"],
        "is_error": bool(data["is_error"]),
        "images": data["images"] or None,
        "meta": clean(data["meta"]) or None,
        "input_tokens": usage.input_tokens if usage else None,
        "output_tokens": usage.output_tokens if usage else None,
        "cache_read_tokens": usage.cache_read_tokens if usage else None,
        "cache_write_tokens": usage.cache_write_tokens if usage else None,
        "model": step.model,
        "created_at": now,
    }


def _session(row: Any) -> SessionRecord:  # a `SessionRow` or a row of `_NEWEST_SESSION`
    return SessionRecord(id=row.id, key=row.key, bot=row.bot, parent_id=row.parent_id,
                         created_at=row.created_at, model=row.model, state=dict(row.state or {}))


def _message(row: MessageRow) -> Message:
    return Message.from_dict({
        "role": row.role,
        "content": row.content,
        "tool_calls": row.tool_calls or (),
        "tool_call_id": row.tool_call_id,
        "tool_name": row.tool_name,
        "is_error": row.is_error,
        "images": row.images or (),
        "meta": row.meta or {},
    })


def _usage(row: MessageRow) -> Usage | None:
    counts = (row.input_tokens, row.output_tokens, row.cache_read_tokens, row.cache_write_tokens)
    if all(c is None for c in counts):
        return None
    return Usage(*(c or 0 for c in counts))


class SessionRepository(SqlRepository):
    """`hermes_engine.ports.storage.SessionStore`: sessions and their messages."""

    async def _newest_session(self, session: AsyncSession, key: str, bot: str) -> SessionRow | None:
        return await session.scalar(
            sa.select(SessionRow).where(SessionRow.bot == bot, SessionRow.key == key)
            .order_by(SessionRow.id.desc()).limit(1))

    async def active_session(self, key: str, bot: str) -> SessionRecord:
        """The newest session for `key` and `bot`; the first call creates it (concurrent first calls
        get the same one)."""
        row = await self._hot(_NEWEST_SESSION, {"bot": bot, "key": key}, lambda result: result.first())
        if row is not None:
            return _session(row)
        return await self._first_session(key, bot)

    @whole
    async def _first_session(self, key: str, bot: str) -> SessionRecord:
        async with self._write() as session:
            await self._advisory_lock(session, LOCK_SESSION_CREATE, f"{bot}\x1f{key}")
            row = await self._newest_session(session, key, bot)
            if row is None:
                row = SessionRow(key=key, bot=bot, parent_id=None, state={}, created_at=self._now())
                session.add(row)
                await session.flush()
            return _session(row)

    @whole
    async def new_session(self, key: str, bot: str, parent_id: int | None = None) -> SessionRecord:
        async with self._session() as session, session.begin():
            row = SessionRow(key=key, bot=bot, parent_id=parent_id, state={}, created_at=self._now())
            session.add(row)
            await session.flush()
            return _session(row)

    @whole
    async def get_session(self, session_id: int) -> SessionRecord | None:
        async with self._session() as session:
            row = await session.get(SessionRow, session_id)
            return _session(row) if row is not None else None

    @whole
    async def update_session(self, session_id: int, *, model: str | None = ...,  # type: ignore[assignment]
                             state: dict[str, Any] | None = None) -> None:
        """Set the model override (`None` clears it; leave it out to keep it) and/or replace `state`
        as a whole. Raises LookupError for an unknown session."""
        values: dict[str, Any] = {}
        if model is not ...:  # type: ignore[comparison-overlap]  # `...` is the "leave it" default
            values["model"] = model
        if state is not None:
            values["state"] = clean(dict(state))
        async with self._single() as session, session.begin():  # one statement
            found: object | None
            if not values:
                found = await session.get(SessionRow, session_id)
            else:
                result = await session.execute(
                    sa.update(SessionRow).where(SessionRow.id == session_id).values(**values)
                    .returning(SessionRow.id))
                found = result.first()
            if found is None:
                raise LookupError(f"no session {session_id}")

    # -- messages

    async def append_message(self, session_id: int, message: Message, *, person_id: int | None = None,
                             usage: Usage | None = None, model: str | None = None) -> int:
        return (await self.append_messages(session_id, [NewMessage(message, person_id, usage, model)]))[0]

    async def append_messages(self, session_id: int, steps: Sequence[NewMessage]) -> list[int]:
        """One statement for all of them (an executemany that SQLAlchemy sends as one multi-row INSERT),
        so a turn's steps cost one round trip."""
        if not steps:
            return []
        now = self._now()
        rows = [_row(session_id, step, now) for step in steps]
        return await self._hot(_INSERT_MESSAGES, rows if len(rows) > 1 else rows[0],
                               lambda r: sorted(int(i) for i in r.scalars().all()))

    @whole
    async def load_messages(self, session_id: int) -> list[Message]:
        """The session's messages in the order they were appended."""
        async with self._session() as session:
            rows = await session.scalars(
                sa.select(MessageRow).where(MessageRow.session_id == session_id).order_by(MessageRow.id))
            return [_message(row) for row in rows]

    @whole
    async def load_stored_messages(self, session_id: int) -> list[StoredMessage]:
        async with self._single() as session:
            rows = await session.scalars(
                sa.select(MessageRow).where(MessageRow.session_id == session_id).order_by(MessageRow.id))
            return [StoredMessage(id=row.id, session_id=row.session_id, person_id=row.person_id,
                                  message=_message(row), usage=_usage(row), model=row.model,
                                  created_at=row.created_at) for row in rows]

    async def newest_with_last_message(self, key: str, bot: str) -> tuple[SessionRecord, int | None]:
        row = await self._hot(_NEWEST_WITH_LAST_MESSAGE, {"bot": bot, "key": key}, lambda result: result.first())
        if row is not None:
            return _session(row), row.last_message_id
        return await self._first_session(key, bot), None

    async def last_message_id(self, session_id: int) -> int | None:
        return await self._hot(_LAST_MESSAGE_ID, {"session_id": session_id}, lambda result: result.scalar())

    @whole
    async def session_usage(self, session_id: int) -> Usage:
        columns = (MessageRow.input_tokens, MessageRow.output_tokens, MessageRow.cache_read_tokens,
                   MessageRow.cache_write_tokens)
        async with self._single() as session:
            result = await session.execute(
                sa.select(*(sa.func.coalesce(sa.func.sum(c), 0) for c in columns))
                .where(MessageRow.session_id == session_id))
            return Usage(*(int(v) for v in result.one()))
