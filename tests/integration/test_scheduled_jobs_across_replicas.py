"""Scheduled jobs (curator, review, housekeeping) on two replicas sharing one PostgreSQL: one runs a job
under its lease, and when that one dies mid-run (stops renewing), the job moves to the other once the lease
has run out."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from postgres import PG_URL, fresh_schema

from hermes_engine.core.scheduler import Scheduler
from storage.store import SqlStore

pytestmark = [pytest.mark.postgres,
              pytest.mark.skipif(not PG_URL, reason="HERMES_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)")]

HOUR = 3600.0


async def test_a_job_whose_replica_died_mid_run_moves_to_the_other_when_its_lease_runs_out():
    now = [datetime(2026, 1, 1, tzinfo=UTC)]  # the database's clock as both replicas see it
    monotonic = [1000.0]
    async with fresh_schema() as schema:
        url = f"{PG_URL}?options=-csearch_path%3D{schema}"
        stores = [SqlStore(url, clock=lambda: now[0]), SqlStore(url, clock=lambda: now[0])]
        for store in stores:
            await store.init()
        never = asyncio.Event()
        runs: list[str] = []

        async def dies_mid_run() -> None:
            runs.append("a")
            await never.wait()  # the process is gone: neither finishing nor renewing nor giving back

        async def runs_to_the_end() -> None:
            runs.append("b")

        a = Scheduler(stores[0], holder="replica-a", clock=lambda: monotonic[0])
        b = Scheduler(stores[1], holder="replica-b", clock=lambda: monotonic[0])
        a.every("housekeeping", HOUR, dies_mid_run)
        b.every("housekeeping", HOUR, runs_to_the_end)
        try:
            assert await a.tick() == ["housekeeping"]
            assert await b.tick(wait=True) == []  # a holds it
            now[0] += timedelta(seconds=HOUR - 60)
            monotonic[0] += HOUR
            assert await b.tick(wait=True) == []  # still a's: its lease has not run out
            now[0] += timedelta(seconds=120)
            monotonic[0] += 120
            assert await b.tick(wait=True) == ["housekeeping"]
            assert runs == ["a", "b"]
            assert b.jobs["housekeeping"].last_error is None
        finally:
            await a.stop()
            await b.stop()
            for store in stores:
                await store.close()
