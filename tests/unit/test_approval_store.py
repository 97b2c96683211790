"""The `ApprovalStore` role on SQLite and PostgreSQL: the first answer to a request wins, a request that
expired or ended takes no answer, and expired requests are swept a day later."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from postgres import BACKENDS, empty_database

from storage.store import SqlStore

START = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path, clock: Clock):
    async with empty_database(request.param, str(tmp_path / "hermes.db")) as (url, options):
        s = SqlStore(url, engine_options=options, clock=clock)
        await s.init()
        try:
            yield s
        finally:
            await s.close()


async def test_the_first_answer_wins_and_later_ones_change_nothing(store: SqlStore) -> None:
    await store.record_approval("r1", "bot", "telegram:chat:1", START + timedelta(minutes=5))
    pending = await store.get_approval("r1")
    assert pending is not None and (pending.state, pending.decision, pending.session_key) == (
        "pending", None, "telegram:chat:1")

    first, second = await asyncio.gather(store.answer_approval("r1", "bot", "once", "alice"),
                                         store.answer_approval("r1", "bot", "deny", "carol"))
    assert [first, second].count(True) == 1
    record = await store.get_approval("r1")
    assert record is not None and record.state == "decided"
    assert (record.decision, record.decided_by) == (("once", "alice") if first else ("deny", "carol"))
    assert await store.answer_approval("r1", "bot", "session", "alice") is False
    ended = await store.end_approval("r1")  # ending after the answer keeps the answer
    assert ended == record


async def test_who_asked_is_kept_with_the_request(store: SqlStore) -> None:
    await store.record_approval("r1", "bot", "k", START + timedelta(minutes=5), asked_by="alice")
    await store.record_approval("r2", "bot", "k", START + timedelta(minutes=5))
    assert (await store.get_approval("r1")).asked_by == "alice"
    assert (await store.get_approval("r2")).asked_by is None


async def test_a_request_of_another_bot_or_unknown_takes_no_answer(store: SqlStore) -> None:
    await store.record_approval("r1", "bot", "k", START + timedelta(minutes=5))
    assert await store.answer_approval("r1", "other-bot", "once", "alice") is False
    assert await store.answer_approval("nope", "bot", "once", "alice") is False
    assert await store.get_approval("nope") is None
    assert (await store.get_approval("r1")).state == "pending"  # type: ignore[union-attr]


async def test_an_expired_request_takes_no_answer(store: SqlStore, clock: Clock) -> None:
    await store.record_approval("r1", "bot", "k", START + timedelta(seconds=30))
    clock.now = START + timedelta(seconds=31)
    assert await store.answer_approval("r1", "bot", "once", "alice") is False
    assert (await store.get_approval("r1")).state == "pending"  # type: ignore[union-attr]


async def test_a_request_ended_by_its_replica_takes_no_answer(store: SqlStore) -> None:
    await store.record_approval("r1", "bot", "k", START + timedelta(minutes=5))
    ended = await store.end_approval("r1")
    assert ended is not None and (ended.state, ended.decision) == ("ended", None)
    assert await store.answer_approval("r1", "bot", "once", "alice") is False
    assert await store.end_approval("nope") is None


async def test_requests_expired_a_day_ago_are_swept_when_the_next_is_recorded(store: SqlStore,
                                                                               clock: Clock) -> None:
    await store.record_approval("old", "bot", "k", START + timedelta(minutes=5))
    await store.record_approval("recent", "bot", "k", START + timedelta(hours=20))
    clock.now = START + timedelta(days=1, minutes=6)
    await store.record_approval("new", "bot", "k", clock.now + timedelta(minutes=5))
    assert await store.get_approval("old") is None
    assert await store.get_approval("recent") is not None and await store.get_approval("new") is not None


async def test_a_press_reaching_another_replica_lets_the_person_who_asked_answer_when_the_profile_does(
        store: SqlStore) -> None:
    from hermes_engine.approvals.gate import ApprovalGate
    from hermes_engine.approvals.shared import SharedRequests
    from hermes_engine.ports.approval import ApprovalRequest, Decision, Pressed
    from hermes_engine.ports.inbound import ReplyTarget

    request = ApprovalRequest("r1", "bot", "k", ReplyTarget("test", "acct", "c1"), "rm -rf x", "dangerous", "why",
                              datetime.now(UTC) + timedelta(minutes=5), asked_by="alice")
    assert await SharedRequests(store, "bot").open(request)
    elsewhere = ApprovalGate(None, {"admin1"}.__contains__, 30.0, person_approves=True)  # another replica
    elsewhere.share_through(store, "bot")
    assert await elsewhere.press("r1", "bob", Decision.ONCE) is Pressed.NOT_AN_APPROVER
    assert await elsewhere.press("r1", "alice", Decision.ONCE) is Pressed.TAKEN
    assert (await store.get_approval("r1")).decided_by == "alice"
