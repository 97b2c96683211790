"""The clock's metrics through the real engine: jobs found due, runs by kind and outcome, and lateness from
the slot to the run's record, served on `/metrics` with no person, chat or text in a label."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from engine_harness import make_profile

from hermes_engine.clock import ClockFeature
from hermes_engine.ports.jobs import JobSpec
from hermes_gateway.metrics import PrometheusMetrics

OWNER_ALLOWED = {"allowed_users": ["u1"]}  # the jobs' owner may write in their chats


async def test_jobs_due_runs_by_outcome_and_lateness_are_counted_and_served(engine):
    metrics = PrometheusMetrics()
    e = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"]),
                     features=[ClockFeature()], metrics=metrics)
    person = (await e.store.resolve_account("test", "acct", "u1")).person_id
    late = datetime.now(UTC) - timedelta(seconds=5)
    target = {"platform": "test", "account": "acct", "chat_id": "c1"}
    job = await e.store.create_job(JobSpec(
        owner_id=person, bot="testbot", target=target, session_key="test:acct:dm:c1", name="stretch",
        schedule="in 1s", timezone="UTC", kind="reminder", text="stretch", next_due=late, once=True))
    skipped = await e.store.create_job(JobSpec(
        owner_id=person, bot="testbot", target=target, session_key="test:acct:dm:c1", name="old",
        schedule="every 2h", timezone="UTC", kind="reminder", text="old", next_due=late - timedelta(hours=1),
        once=False, catch_up="skip"))

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"bot": "testbot", **labels})

    deadline = asyncio.get_running_loop().time() + 10
    while sample("hermes_job_runs_total", kind="reminder", outcome="delivered") != 1:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    while sample("hermes_job_runs_total", kind="reminder", outcome="skipped") != 1:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    assert sample("hermes_job_lateness_seconds_count", kind="reminder") == 2
    assert 5 <= (sample("hermes_job_lateness_seconds_sum", kind="reminder") or 0) < 3600 + 5 + 30
    assert sample("hermes_job_lateness_seconds_bucket", kind="reminder", le="2.0") == 0
    assert sample("hermes_jobs_due") is not None
    body, _ = metrics.exposition()
    text = body.decode()
    assert 'hermes_job_runs_total{bot="testbot",kind="reminder",outcome="delivered"} 1.0' in text
    assert "stretch" not in text and "c1" not in text and f"job:{job.id}" not in text
    assert (await e.store.get_job(skipped.id)).last_outcome == "skipped: missed while down"
