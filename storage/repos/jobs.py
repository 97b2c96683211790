"""The `ScheduledJobs` role (migrations 0017 to 0019): reminders and scheduled tasks, and each person's time zone.

A run is recorded by one UPDATE that names the slot it ran (`next_due`): two replicas, or a replica and its
own restart, can both deliver a slot only through the delivery ledger's idempotency key, and only one of them
records it. The lease `job:<id>` keeps the second from trying at all while the first is alive.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa

from hermes_engine.ports.jobs import CatchUp, JobChanges, JobKind, JobRecord, JobSpec, JobState
from storage.models import PersonTimezoneRow, ScheduledJobRow, table_of
from storage.repos.base import SqlRepository, whole
from storage.values import clean, clean_text

__all__ = ["JobRepository"]

OPEN_STATES = ("active", "paused")


def _job(row: ScheduledJobRow) -> JobRecord:
    return JobRecord(id=row.id, owner_id=row.owner_id, bot=row.bot, target=dict(row.target or {}),
                     session_key=row.session_key, name=row.name, schedule=row.schedule, timezone=row.timezone,
                     kind=cast(JobKind, row.kind), text=row.text, state=cast(JobState, row.state),
                     next_due=row.next_due, once=bool(row.once), catch_up=cast(CatchUp, row.catch_up),
                     failures=row.failures, runs=row.runs, last_due=row.last_due, last_run_at=row.last_run_at,
                     last_outcome=row.last_outcome, created_at=row.created_at, tokens=row.tokens or 0,
                     started_due=row.started_due, runs_left=row.runs_left,
                     toolsets=tuple(row.toolsets) if row.toolsets is not None else None,
                     undelivered=row.undelivered, undelivered_due=row.undelivered_due)


class JobRepository(SqlRepository):
    """`hermes_engine.ports.storage.ScheduledJobs`."""

    @whole
    async def create_job(self, spec: JobSpec) -> JobRecord:
        row = ScheduledJobRow(owner_id=spec.owner_id, bot=spec.bot, target=clean(dict(spec.target)),
                              session_key=spec.session_key, name=clean_text(spec.name)[:255],
                              schedule=clean_text(spec.schedule)[:255], timezone=spec.timezone, kind=spec.kind,
                              text=clean_text(spec.text), state="active", next_due=spec.next_due, once=spec.once,
                              catch_up=spec.catch_up, failures=0, runs=0, created_at=self._now(), tokens=0,
                              runs_left=spec.runs_left,
                              toolsets=list(spec.toolsets) if spec.toolsets is not None else None)
        async with self._session() as session, session.begin():
            session.add(row)
            await session.flush()
            return _job(row)

    @whole
    async def get_job(self, job_id: int) -> JobRecord | None:
        async with self._session() as session:
            row = await session.get(ScheduledJobRow, job_id)
            return _job(row) if row is not None else None

    @whole
    async def list_jobs(self, bot: str, *, owner_id: int | None = None) -> list[JobRecord]:
        query = sa.select(ScheduledJobRow).where(ScheduledJobRow.bot == bot, ScheduledJobRow.state.in_(OPEN_STATES))
        if owner_id is not None:
            query = query.where(ScheduledJobRow.owner_id == owner_id)
        async with self._session() as session:
            return [_job(row) for row in await session.scalars(query.order_by(ScheduledJobRow.id))]

    @whole
    async def due_jobs(self, bot: str, now: datetime, *, limit: int = 100) -> list[JobRecord]:
        query = (sa.select(ScheduledJobRow)
                 .where(ScheduledJobRow.bot == bot, ScheduledJobRow.state == "active",
                        ScheduledJobRow.next_due <= now)
                 .order_by(ScheduledJobRow.next_due, ScheduledJobRow.id).limit(limit))
        async with self._session() as session:
            return [_job(row) for row in await session.scalars(query)]

    @whole
    async def next_due_at(self, bot: str) -> datetime | None:
        query = (sa.select(ScheduledJobRow.next_due)
                 .where(ScheduledJobRow.bot == bot, ScheduledJobRow.state == "active",
                        ScheduledJobRow.next_due.is_not(None))
                 .order_by(ScheduledJobRow.next_due).limit(1))
        async with self._session() as session:
            return await session.scalar(query)

    @whole
    async def set_job_state(self, job_id: int, state: JobState, *, next_due: datetime | None = None) -> bool:
        values: dict[str, Any] = {"state": state}
        if state == "active":
            values.update(next_due=next_due, failures=0, started_due=None, undelivered=None, undelivered_due=None)
        async with self._single() as session, session.begin():
            result = await session.execute(sa.update(ScheduledJobRow).where(ScheduledJobRow.id == job_id)
                                           .values(**values).returning(ScheduledJobRow.id))
            return result.first() is not None

    @whole
    async def delete_job(self, job_id: int) -> bool:
        async with self._single() as session, session.begin():
            result = await session.execute(sa.delete(ScheduledJobRow).where(ScheduledJobRow.id == job_id)
                                           .returning(ScheduledJobRow.id))
            return result.first() is not None

    @whole
    async def update_job(self, job_id: int, changes: JobChanges) -> JobRecord | None:
        values: dict[str, Any] = {}
        if changes.name is not None:
            values["name"] = clean_text(changes.name)[:255]
        if changes.text is not None:
            values["text"] = clean_text(changes.text)
        if changes.schedule is not None:
            values["schedule"] = clean_text(changes.schedule)[:255]
        if changes.next_due is not None:
            values.update(next_due=changes.next_due, started_due=None)
        if changes.once is not None:
            values["once"] = changes.once
        if changes.runs_left is not None:
            values["runs_left"] = changes.runs_left
        if changes.toolsets is not None:
            values["toolsets"] = list(changes.toolsets)
        if changes.target is not None and changes.session_key is not None:
            values.update(target=clean(dict(changes.target)), session_key=changes.session_key)
        async with self._single() as session, session.begin():
            if values:
                await session.execute(sa.update(ScheduledJobRow).where(ScheduledJobRow.id == job_id).values(**values))
            row = await session.get(ScheduledJobRow, job_id)
            return _job(row) if row is not None else None

    @whole
    async def start_run(self, job_id: int, due: datetime) -> bool:
        table = table_of(ScheduledJobRow)
        started = sa.or_(table.c.started_due.is_(None), table.c.started_due != due)
        async with self._single() as session, session.begin():
            result = await session.execute(
                sa.update(table).where(table.c.id == job_id, table.c.next_due == due, table.c.state == "active",
                                       started)
                .values(started_due=due).returning(table.c.id))
            return result.first() is not None

    @whole
    async def finish_run(self, job_id: int, due: datetime, *, next_due: datetime | None, outcome: str,
                         failed: bool = False, tokens: int = 0,
                         undelivered: tuple[str, datetime] | None = None) -> bool:
        table = table_of(ScheduledJobRow)
        answer, answer_due = undelivered if undelivered is not None else (None, None)
        values: dict[str, Any] = {
            "next_due": next_due, "last_due": due, "last_run_at": self._now(), "last_outcome": clean_text(outcome),
            "runs": table.c.runs + 1, "failures": table.c.failures + 1 if failed else 0,
            "tokens": table.c.tokens + max(0, tokens), "started_due": None,
            "undelivered": clean_text(answer) if answer is not None else None, "undelivered_due": answer_due}
        if not failed:  # NULL (unbounded) stays NULL
            values["runs_left"] = table.c.runs_left - 1
        if next_due is None:
            values["state"] = "done"
        async with self._single() as session, session.begin():
            result = await session.execute(
                sa.update(table).where(table.c.id == job_id, table.c.next_due == due, table.c.state == "active")
                .values(**values).returning(table.c.id))
            return result.first() is not None

    @whole
    async def person_timezone(self, person_id: int) -> str | None:
        async with self._session() as session:
            row = await session.get(PersonTimezoneRow, person_id)
            return row.timezone if row is not None else None

    @whole
    async def set_person_timezone(self, person_id: int, zone: str) -> None:
        table = table_of(PersonTimezoneRow)
        stmt = self._insert(table).values(person_id=person_id, timezone=zone, updated_at=self._now())
        stmt = stmt.on_conflict_do_update(index_elements=["person_id"],
                                          set_={"timezone": stmt.excluded.timezone,
                                                "updated_at": stmt.excluded.updated_at})
        async with self._single() as session, session.begin():
            await session.execute(stmt)
