"""What the store keeps of requests for approval, which the dashboard's Approvals page reads: what was asked
(secrets redacted) and its risk, a press taken on the replica that asked recorded with who pressed it and when
(not only one that reached another replica), a request nobody answered ended without anyone named, and the kept
requests listed newest first, per bot."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from postgres import BACKENDS, empty_database

from hermes_engine.approvals.gate import ApprovalGate
from hermes_engine.ports.approval import ApprovalAnswers, ApprovalRequest, Decision
from hermes_engine.ports.inbound import ReplyTarget
from storage.store import SqlStore


class Shown:
    """An asker that keeps the questions it was asked to show, as chat buttons would."""

    def __init__(self) -> None:
        self.asked: list[ApprovalRequest] = []
        self.shown = asyncio.Event()
        self.ended: list[tuple[str, Decision, str]] = []

    def take_presses(self, answers: ApprovalAnswers) -> None:
        self.answers = answers

    async def ask(self, request: ApprovalRequest, answers: ApprovalAnswers) -> None:
        self.asked.append(request)
        self.shown.set()

    async def settled(self, request: ApprovalRequest, decision: Decision, note: str) -> None:
        self.ended.append((request.id, decision, note))


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path):
    async with empty_database(request.param, str(tmp_path / "hermes.db")) as (url, options):
        s = SqlStore(url, engine_options=options)
        await s.init()
        try:
            yield s
        finally:
            await s.close()


async def asked(gate: ApprovalGate, shown: Shown, command: str = "rm -rf build"
                ) -> tuple[asyncio.Task[tuple[Decision, str]], ApprovalRequest]:
    waiting = asyncio.create_task(gate.decide(bot="bot", session_key="telegram:bot:dm:7", command=command,
                                              target=ReplyTarget("telegram", "bot", "7"), risk="dangerous",
                                              reason="deletes files", asked_by="7"))
    await asyncio.wait_for(shown.shown.wait(), 5)
    return waiting, shown.asked[-1]


async def test_a_press_on_the_replica_that_asked_is_recorded_with_who_pressed(store: SqlStore) -> None:
    shown = Shown()
    gate = ApprovalGate(shown, {"admin1"}.__contains__, 30.0)
    gate.share_through(store, "bot")
    waiting, request = await asked(gate, shown)
    assert gate.answer(request.id, "admin1", Decision.ONCE)
    assert await waiting == (Decision.ONCE, "approved by admin1")
    record = await store.get_approval(request.id)
    assert record is not None and (record.state, record.decision, record.decided_by, record.asked_by) == (
        "decided", "once", "admin1", "7")
    assert (record.command, record.risk) == ("rm -rf build", "dangerous")
    assert record.decided_at is not None and record.created_at is not None
    assert record.created_at <= record.decided_at <= datetime.now(UTC)


async def test_a_secret_in_the_command_asked_about_is_not_kept(store: SqlStore) -> None:
    secret = "sk-proj-" + "Qx7Lm2Np9Rt4Vw8Yz3Bc6Df1Gh5Jk0" * 2
    shown = Shown()
    gate = ApprovalGate(shown, {"admin1"}.__contains__, 30.0)
    gate.share_through(store, "bot")
    waiting, request = await asked(gate, shown, f"curl -H 'Authorization: Bearer {secret}' https://api.example")
    assert gate.answer(request.id, "admin1", Decision.DENY)
    await waiting
    record = await store.get_approval(request.id)
    assert record is not None and record.command is not None
    assert secret not in record.command and record.command.startswith("curl -H ")
    assert record.command.endswith("https://api.example")


async def test_a_request_nobody_answered_ends_with_nobody_named(store: SqlStore) -> None:
    shown = Shown()
    gate = ApprovalGate(shown, {"admin1"}.__contains__, 0.2)
    gate.share_through(store, "bot")
    waiting, request = await asked(gate, shown)
    assert await waiting == (Decision.DENY, "nobody approved it in time")
    record = await store.get_approval(request.id)
    assert record is not None and (record.state, record.decision, record.decided_by, record.decided_at) == (
        "ended", None, None, None)


async def test_kept_requests_are_listed_newest_first_and_per_bot(store: SqlStore) -> None:
    later = datetime.now(UTC) + timedelta(minutes=5)
    for request_id, bot in (("r1", "bot"), ("r2", "other"), ("r3", "bot")):
        await store.record_approval(request_id, bot, "k", later)
        await asyncio.sleep(0.01)  # asked one after the other
    assert [r.id for r in await store.recent_approvals()] == ["r3", "r2", "r1"]
    assert [r.id for r in await store.recent_approvals(bot="bot")] == ["r3", "r1"]
    assert [r.id for r in await store.recent_approvals(bot="bot", limit=1)] == ["r3"]
    [newest] = await store.recent_approvals(limit=1)
    assert newest.created_at is not None and newest.created_at <= datetime.now(UTC)
