"""The `ScheduledJobs` role on SQLite and PostgreSQL: a slot is recorded once, whoever races for it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from postgres import BACKENDS, PG_URL, fresh_schema

from hermes_engine.ports.jobs import JobSpec
from storage.store import SqlStore

NOW = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path):
    if request.param == "sqlite":
        s = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}", clock=lambda: NOW)
        await s.init()
        yield s
        await s.close()
        return
    assert PG_URL
    async with fresh_schema() as schema:
        s = SqlStore(PG_URL, clock=lambda: NOW,
                     engine_options={"connect_args": {"server_settings": {"search_path": schema}}})
        await s.init()
        yield s
        await s.close()


async def _job(store: SqlStore, person_id: int, *, due: datetime = NOW, once: bool = False):
    return await store.create_job(JobSpec(
        owner_id=person_id, bot="bot", target={"platform": "telegram", "account": "a", "chat_id": "1"},
        session_key="telegram:a:dm:1", name="stretch", schedule="every 2h", timezone="Europe/Berlin",
        kind="reminder", text="stretch", next_due=due, once=once))


async def test_a_due_slot_is_recorded_by_one_of_many_racing_runs(store: SqlStore) -> None:
    person = (await store.resolve_account("telegram", "a", "1")).person_id
    job = await _job(store, person)
    later = NOW + timedelta(hours=2)
    won = await asyncio.gather(*(store.finish_run(job.id, NOW, next_due=later, outcome="delivered")
                                 for _ in range(8)))
    assert won.count(True) == 1
    after = await store.get_job(job.id)
    assert after is not None
    assert (after.next_due, after.last_due, after.runs, after.last_outcome) == (later, NOW, 1, "delivered")


async def test_due_jobs_are_the_active_ones_whose_time_came(store: SqlStore) -> None:
    person = (await store.resolve_account("telegram", "a", "1")).person_id
    due = await _job(store, person, due=NOW - timedelta(seconds=1))
    await _job(store, person, due=NOW + timedelta(minutes=5))
    paused = await _job(store, person, due=NOW - timedelta(minutes=1))
    await store.set_job_state(paused.id, "paused")
    assert [j.id for j in await store.due_jobs("bot", NOW)] == [due.id]
    assert await store.next_due_at("bot") == NOW - timedelta(seconds=1)
    assert await store.due_jobs("other", NOW) == []


async def test_a_run_of_a_once_job_ends_it(store: SqlStore) -> None:
    person = (await store.resolve_account("telegram", "a", "1")).person_id
    job = await _job(store, person, once=True)
    assert await store.finish_run(job.id, NOW, next_due=None, outcome="delivered")
    assert not await store.finish_run(job.id, NOW, next_due=None, outcome="delivered")
    done = await store.get_job(job.id)
    assert done is not None and done.state == "done" and done.next_due is None
    assert await store.list_jobs("bot", owner_id=person) == []


async def test_a_forgotten_person_loses_their_jobs_and_time_zone(store: SqlStore) -> None:
    alice = (await store.resolve_account("telegram", "a", "1")).person_id
    bob = (await store.resolve_account("telegram", "a", "2")).person_id
    await _job(store, alice)
    await _job(store, alice)
    kept = await _job(store, bob)
    await store.set_person_timezone(alice, "Europe/Berlin")
    await store.set_person_timezone(alice, "Asia/Tokyo")
    assert await store.person_timezone(alice) == "Asia/Tokyo"
    record = await store.forget_person(alice)
    assert record is not None and record.jobs == 2
    assert [j.id for j in await store.list_jobs("bot")] == [kept.id]
    assert await store.person_timezone(alice) is None
