"""Two replicas on one PostgreSQL, both ticking: each due reminder is delivered by one of them, once."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from engine_harness import make_profile
from postgres import PG_URL, fresh_schema

from hermes_engine.clock import ClockFeature
from hermes_engine.ports.jobs import JobSpec

pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(not PG_URL, reason="HERMES_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)")]

REMINDERS = 20


async def test_each_due_reminder_is_delivered_once_by_one_of_two_replicas(engine, monkeypatch, tmp_path):
    async with fresh_schema() as schema:
        database = (PG_URL, {"connect_args": {"server_settings": {"search_path": schema}}})
        replicas = []
        for name in ("a", "b"):
            monkeypatch.setenv("HERMES_REPLICA_ID", name)
            replicas.append(await engine(profile=make_profile(access={"allowed_users": ["u1"]},
                                                              toolsets=["core", "clock"]),
                                         features=[ClockFeature()], database=database, home=tmp_path / name))
        store = replicas[0].store
        person = (await store.resolve_account("test", "acct", "u1")).person_id
        now = datetime.now(UTC)
        for i in range(REMINDERS):
            await store.create_job(JobSpec(
                owner_id=person, bot="testbot", target={"platform": "test", "account": "acct", "chat_id": "c1"},
                session_key="test:acct:dm:c1", name=f"r{i}", schedule="in 2s", timezone="UTC", kind="reminder",
                text=f"r{i}", next_due=now + timedelta(seconds=1 + i / REMINDERS), once=True))

        def delivered() -> Counter[str]:
            return Counter(text for r in replicas for text in r.outlet.texts)

        for _ in range(300):  # 15 s at most
            if sum(delivered().values()) >= REMINDERS:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(2)
        assert delivered() == Counter(f"⏰ Reminder: r{i}" for i in range(REMINDERS))
        assert await store.list_jobs("testbot") == []
        for r in replicas:
            await r.stop()
