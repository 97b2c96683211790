"""The `ScheduledJobs` role on SQLite and PostgreSQL: a slot is recorded once, whoever races for it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from postgres import BACKENDS, PG_URL, fresh_schema

from hermes_engine.ports.jobs import JobChanges, JobSpec
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


async def test_a_task_slot_is_started_by_one_of_many_racing_runs_and_the_record_clears_the_mark(
        store: SqlStore) -> None:
    person = (await store.resolve_account("telegram", "a", "1")).person_id
    job = await _job(store, person)
    won = await asyncio.gather(*(store.start_run(job.id, NOW) for _ in range(8)))
    assert won.count(True) == 1
    started = await store.get_job(job.id)
    assert started is not None and started.started_due == NOW
    assert not await store.start_run(job.id, NOW + timedelta(hours=1))  # not the job's slot
    later = NOW + timedelta(hours=2)
    assert await store.finish_run(job.id, NOW, next_due=later, outcome="delivered", tokens=120)
    assert await store.start_run(job.id, later)
    assert await store.finish_run(job.id, later, next_due=later + timedelta(hours=2), outcome="failed: x",
                                  failed=True, tokens=30)
    after = await store.get_job(job.id)
    assert after is not None
    assert (after.started_due, after.tokens, after.failures, after.runs) == (None, 150, 1, 2)


async def test_runs_left_count_down_on_runs_that_did_not_fail(store: SqlStore) -> None:
    person = (await store.resolve_account("telegram", "a", "1")).person_id
    job = await store.create_job(JobSpec(
        owner_id=person, bot="bot", target={}, session_key="k", name="twice", schedule="every 2h",
        timezone="UTC", kind="task", text="look", next_due=NOW, once=False, runs_left=2, toolsets=("core",)))
    assert (job.runs_left, job.toolsets, job.tokens) == (2, ("core",), 0)
    later = NOW + timedelta(hours=2)
    assert await store.finish_run(job.id, NOW, next_due=later, outcome="failed: x", failed=True)
    assert (await store.get_job(job.id)).runs_left == 2  # type: ignore[union-attr]
    assert await store.finish_run(job.id, later, next_due=later + timedelta(hours=2), outcome="delivered")
    assert (await store.get_job(job.id)).runs_left == 1  # type: ignore[union-attr]


async def test_an_update_changes_only_what_it_names(store: SqlStore) -> None:
    person = (await store.resolve_account("telegram", "a", "1")).person_id
    job = await _job(store, person)
    await store.start_run(job.id, NOW)
    due = NOW + timedelta(days=1)
    changed = await store.update_job(job.id, JobChanges(name="stand up", schedule="every day at 9am", next_due=due))
    assert changed is not None
    assert (changed.name, changed.text, changed.schedule, changed.next_due, changed.started_due) == (
        "stand up", "stretch", "every day at 9am", due, None)
    renamed = await store.update_job(job.id, JobChanges(text="stand and stretch"))
    assert renamed is not None and renamed.text == "stand and stretch"
    assert await store.update_job(10_000, JobChanges(name="x")) is None


async def test_an_undelivered_answer_is_kept_until_a_record_without_it_or_a_resume(store: SqlStore) -> None:
    person = (await store.resolve_account("telegram", "a", "1")).person_id
    job = await _job(store, person)
    retry = NOW + timedelta(seconds=30)
    assert await store.finish_run(job.id, NOW, next_due=retry, outcome="not delivered: 502", failed=True,
                                  undelivered=("🗓 news\n\nRates are unchanged.", NOW))
    kept = await store.get_job(job.id)
    assert kept is not None and (kept.undelivered, kept.undelivered_due) == ("🗓 news\n\nRates are unchanged.", NOW)
    assert await store.finish_run(job.id, retry, next_due=NOW + timedelta(hours=2), outcome="delivered")
    delivered = await store.get_job(job.id)
    assert delivered is not None and (delivered.undelivered, delivered.undelivered_due) == (None, None)

    later = NOW + timedelta(hours=2)
    assert await store.finish_run(job.id, later, next_due=later + timedelta(seconds=30), outcome="not delivered",
                                  failed=True, undelivered=("stale", later))
    assert await store.set_job_state(job.id, "paused")
    assert (await store.get_job(job.id)).undelivered == "stale"  # type: ignore[union-attr]
    assert await store.set_job_state(job.id, "active", next_due=later + timedelta(hours=2))
    assert (await store.get_job(job.id)).undelivered is None  # type: ignore[union-attr]
