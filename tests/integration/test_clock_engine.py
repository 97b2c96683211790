"""The clock through the real engine with an outlet whose platform keeps failing: a reminder that cannot be
delivered is retried with back-off, and paused after three failures in a row."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from engine_harness import make_profile

from hermes_engine.clock import ClockFeature
from hermes_engine.ports.jobs import JobSpec
from hermes_engine.ports.reply import BufferedStream, ReplyStream

OWNER_ALLOWED = {"allowed_users": ["1"]}  # the jobs' owner may write in their chats


class Now:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.t = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.t


class Down:
    """A platform that answers every send with an error."""

    platform = "down"

    def __init__(self) -> None:
        self.sends = 0

    def open_stream(self, target, *, idempotency_key: str) -> ReplyStream:
        return BufferedStream()

    async def send(self, target, text: str, *, idempotency_key: str | None = None) -> None:
        self.sends += 1
        raise RuntimeError("502 Bad Gateway")

    async def typing(self, target) -> None:
        return None


async def _until(predicate, timeout: float = 10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if (value := await predicate()) is not None:
            return value
        await asyncio.sleep(0.05)
    raise TimeoutError


async def test_an_undeliverable_reminder_is_retried_with_back_off_then_paused(engine):
    now = Now()
    e = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"]),
                     features=[ClockFeature(now)])
    down = Down()
    e.gateway.attach(down)
    person = (await e.store.resolve_account("down", "a", "1")).person_id
    job = await e.store.create_job(JobSpec(
        owner_id=person, bot="testbot", target={"platform": "down", "account": "a", "chat_id": "1"},
        session_key="down:a:dm:1", name="stretch", schedule="in 1s", timezone="UTC", kind="reminder",
        text="stretch", next_due=now.t - timedelta(seconds=1), once=True))

    async def failures(n: int):
        record = await e.store.get_job(job.id)
        return record if record is not None and record.failures == n else None

    first = await _until(lambda: failures(1))
    assert first.state == "active" and first.last_outcome == "not delivered: 502 Bad Gateway"
    assert first.next_due == now.t + timedelta(seconds=30)
    await asyncio.sleep(1.5)
    assert down.sends == 1  # not before its retry time
    now.t += timedelta(seconds=31)
    second = await _until(lambda: failures(2))
    assert second.next_due == now.t + timedelta(seconds=60)
    now.t += timedelta(seconds=61)
    await _until(lambda: failures(3))

    async def paused():
        record = await e.store.get_job(job.id)
        return record if record is not None and record.state == "paused" else None

    third = await _until(paused)  # the pause follows the third run's record
    assert third.state == "paused" and down.sends == 4  # three runs, then the one try at telling the owner
    now.t += timedelta(hours=1)
    await asyncio.sleep(1.5)
    assert down.sends == 4


async def test_a_person_at_the_cap_of_reminders_is_refused_a_new_one_and_nothing_is_saved(engine, fake_llm):
    from fakes.fake_llm import Reply

    from hermes_engine.config.clock import ClockSettings

    MAX_JOBS_PER_PERSON = ClockSettings().max_jobs_per_person
    e = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"]), features=[ClockFeature()])
    create = {"action": "create", "message": "stretch", "schedule": "every 2h"}
    fake_llm.script(Reply(tool_calls=[("cronjob", create)]), Reply(text="set"))
    assert await e.say("remind me to stretch every 2 hours") == "set"
    [person] = {j.owner_id for j in await e.store.list_jobs(e.gateway.bot)}
    for n in range(MAX_JOBS_PER_PERSON - 1):
        await e.store.create_job(JobSpec(owner_id=person, bot=e.gateway.bot, target={}, session_key="k",
                                         name=f"r{n}", schedule="every 2h", timezone="UTC", kind="reminder",
                                         text="x", next_due=datetime.now(UTC) + timedelta(hours=2), once=False,
                                         catch_up="once"))
    fake_llm.reset()
    fake_llm.script(Reply(tool_calls=[("cronjob", create)]), Reply(text="refused"))
    assert await e.say("and another one") == "refused"
    assert "the most one person may keep" in fake_llm.requests[1].turn_tool_results[0]
    assert len(await e.store.list_jobs(e.gateway.bot, owner_id=person)) == MAX_JOBS_PER_PERSON


async def test_a_persons_jobs_cannot_be_seen_paused_or_removed_by_someone_else(engine, fake_llm):
    from fakes.fake_llm import Reply

    e = await engine(profile=make_profile(access=OWNER_ALLOWED, toolsets=["core", "clock"]), features=[ClockFeature()])
    fake_llm.script(Reply(tool_calls=[("cronjob", {"action": "create", "message": "take the pills",
                                                   "schedule": "every day at 8am"})]), Reply(text="set"))
    assert await e.say("remind me of my pills", user="alice", chat="alice-dm") == "set"
    [job] = await e.store.list_jobs(e.gateway.bot)
    for action in ("remove", "pause"):
        fake_llm.reset()
        fake_llm.script(Reply(tool_calls=[("cronjob", {"action": action, "job_id": str(job.id)})]), Reply(text="no"))
        assert await e.say(f"{action} job {job.id}", user="mallory", chat="mallory-dm") == "no"
        assert f"you have no job {job.id}" in fake_llm.requests[1].turn_tool_results[0]
    fake_llm.reset()
    fake_llm.script(Reply(tool_calls=[("cronjob", {"action": "list"})]), Reply(text="listed"))
    assert await e.say("list my reminders", user="mallory", chat="mallory-dm") == "listed"
    assert fake_llm.requests[1].turn_tool_results[0] == "No scheduled jobs."
    kept = await e.store.get_job(job.id)
    assert kept is not None and kept.state == "active"
