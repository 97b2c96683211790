"""Standing goals (/goal): the `GoalStore` role. A session key + bot has at most one open goal."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from hermes_engine.ports.storage import GoalRecord
from storage.models import GOAL_STATUSES, OPEN_GOAL_STATUSES, GoalRow
from storage.repos.base import LOCK_GOAL_CREATE, SqlRepository, whole
from storage.values import clean, clean_text

__all__ = ["GoalRepository"]


def _goal(row: GoalRow) -> GoalRecord:
    return GoalRecord(id=row.id, session_key=row.session_key, bot=row.bot, session_id=row.session_id,
                      text=row.text, status=row.status, turns_used=row.turns_used,  # type: ignore[arg-type]
                      tokens_used=row.tokens_used, verdicts=list(row.verdicts or []),
                      target=dict(row.target or {}), created_at=row.created_at, updated_at=row.updated_at)


def _check_goal_status(status: str) -> None:
    if status not in GOAL_STATUSES:
        raise ValueError(f"unknown goal status {status!r}; expected one of {', '.join(GOAL_STATUSES)}")


class GoalRepository(SqlRepository):
    """`hermes_engine.ports.storage.GoalStore`: goals and their progress."""

    @whole
    async def create_goal(self, session_key: str, bot: str, text: str, *, session_id: int | None = None,
                          target: dict[str, Any] | None = None) -> GoalRecord:
        """Start an active goal. An open (active or paused) goal for the same key and bot is marked
        "cleared" in the same transaction: a new /goal replaces the old one."""
        now = self._now()
        async with self._write() as session:
            await self._advisory_lock(session, LOCK_GOAL_CREATE, f"{bot}\x1f{session_key}")
            await session.execute(
                sa.update(GoalRow)
                .where(GoalRow.session_key == session_key, GoalRow.bot == bot,
                       GoalRow.status.in_(OPEN_GOAL_STATUSES))
                .values(status="cleared", updated_at=now))
            row = GoalRow(session_key=session_key, bot=bot, session_id=session_id, text=clean_text(text),
                          status="active", turns_used=0, tokens_used=0, verdicts=[],
                          target=clean(dict(target or {})), created_at=now, updated_at=now)
            session.add(row)
            await session.flush()
            return _goal(row)

    @whole
    async def get_goal(self, goal_id: int) -> GoalRecord | None:
        async with self._session() as session:
            row = await session.get(GoalRow, goal_id)
            return _goal(row) if row is not None else None

    @whole
    async def active_goal(self, session_key: str, bot: str) -> GoalRecord | None:
        """The open goal for `session_key` and `bot`: status "active" or "paused" (check `.status`)."""
        async with self._session() as session:
            row = await session.scalar(
                sa.select(GoalRow)
                .where(GoalRow.session_key == session_key, GoalRow.bot == bot,
                       GoalRow.status.in_(OPEN_GOAL_STATUSES))
                .order_by(GoalRow.id.desc()).limit(1))
            return _goal(row) if row is not None else None

    @whole
    async def update_goal(self, goal_id: int, *, status: str | None = None, text: str | None = None,
                          session_id: int | None = None, turns_used: int | None = None,
                          tokens_used: int | None = None, add_turns: int = 0, add_tokens: int = 0,
                          verdict: dict[str, Any] | None = None,
                          verdicts: list[dict[str, Any]] | None = None,
                          target: dict[str, Any] | None = None) -> GoalRecord | None:
        """Change the given fields; None leaves a field as it is. `add_turns` / `add_tokens` add to the
        counters and `verdict` appends one verdict, atomically with respect to other updates.
        Returns the updated goal, or None for an unknown id. Reopening a goal ("active"/"paused") while
        another goal of the same key and bot is open raises ValueError."""
        if status is not None:
            _check_goal_status(status)
        try:
            async with self._write() as session:
                row = await session.scalar(sa.select(GoalRow).where(GoalRow.id == goal_id).with_for_update())
                if row is None:
                    return None
                if status is not None:
                    row.status = status
                if text is not None:
                    row.text = clean_text(text)
                if session_id is not None:
                    row.session_id = session_id
                if turns_used is not None:
                    row.turns_used = turns_used
                if tokens_used is not None:
                    row.tokens_used = tokens_used
                row.turns_used += add_turns
                row.tokens_used += add_tokens
                if verdicts is not None:
                    row.verdicts = clean(list(verdicts))
                if verdict is not None:
                    row.verdicts = [*(row.verdicts or []), clean(dict(verdict))]
                if target is not None:
                    row.target = clean(dict(target))
                row.updated_at = self._now()
                await session.flush()
                return _goal(row)
        except IntegrityError as exc:
            if status in OPEN_GOAL_STATUSES:
                raise ValueError(f"goal {goal_id} cannot be reopened: another goal is open") from exc
            raise

    @whole
    async def list_goals(self, status: str | None = None, *, bot: str | None = None,
                         session_key: str | None = None) -> list[GoalRecord]:
        """Goals, oldest first, filtered by any of status, bot and session key."""
        stmt = sa.select(GoalRow)
        if status is not None:
            _check_goal_status(status)
            stmt = stmt.where(GoalRow.status == status)
        if bot is not None:
            stmt = stmt.where(GoalRow.bot == bot)
        if session_key is not None:
            stmt = stmt.where(GoalRow.session_key == session_key)
        async with self._session() as session:
            rows = await session.scalars(stmt.order_by(GoalRow.id))
            return [_goal(row) for row in rows]
