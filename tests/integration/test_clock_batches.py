"""The clock through the real engine with an outlet that holds each send: reminders due at the same moment are
sent side by side, a bounded number at a time, each once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from engine_harness import make_profile

from hermes_engine.clock import ClockFeature
from hermes_engine.clock.feature import BATCH_RUNS
from hermes_engine.ports.jobs import JobSpec
from hermes_engine.ports.reply import BufferedStream, ReplyStream

OWNER_ALLOWED = {"allowed_users": ["1"]}  # the jobs' owner may write in their chats


class Held:
    """A platform whose sends wait until the test lets them go; it counts how many wait at once."""

    platform = "held"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.in_flight = 0
        self.most_at_once = 0
        self.sent: list[tuple[str, str | None]] = []

    def open_stream(self, target, *, idempotency_key: str) -> ReplyStream:
        return BufferedStream()

    async def send(self, target, text: str, *, idempotency_key: str | None = None) -> None:
        self.in_flight += 1
        self.most_at_once = max(self.most_at_once, self.in_flight)
        try:
            await self.release.wait()
        finally:
            self.in_flight -= 1
        self.sent.append((target.chat_id, idempotency_key))

    async def typing(self, target) -> None:
        return None


async def _until(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError
        await asyncio.sleep(0.02)


async def _due_reminders(e, count: int, due: datetime) -> list[int]:
    person = (await e.store.resolve_account("held", "a", "1")).person_id
    ids = []
    for n in range(count):
        job = await e.store.create_job(JobSpec(
            owner_id=person, bot="testbot", target={"platform": "held", "account": "a", "chat_id": str(n)},
            session_key=f"held:a:dm:{n}", name=f"r{n}", schedule="in 1m", timezone="UTC", kind="reminder",
            text=f"r{n}", next_due=due, once=True))
        ids.append(job.id)
    return ids


async def test_reminders_due_at_the_same_moment_are_sent_side_by_side_at_most_a_batch_at_a_time(engine):
    now = datetime.now(UTC)
    e = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"]),
                     features=[ClockFeature(lambda: now)])
    held = Held()
    e.gateway.attach(held)
    ids = await _due_reminders(e, BATCH_RUNS + 4, now - timedelta(seconds=1))

    await _until(lambda: held.in_flight == BATCH_RUNS)  # a whole batch waits on the platform at once
    await asyncio.sleep(0.3)
    assert held.most_at_once == BATCH_RUNS  # and no more than that
    held.release.set()
    await _until(lambda: len(held.sent) == len(ids))
    await asyncio.sleep(0.3)
    assert len(held.sent) == len(ids) == len(set(held.sent))  # each once
    for job_id in ids:
        record = await e.store.get_job(job_id)
        assert record is not None and record.state == "done" and record.last_outcome == "delivered"
