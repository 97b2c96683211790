"""The kanban board in the database, on SQLite and PostgreSQL: dependencies, claims, leases, the circuit
breaker and the history."""

from __future__ import annotations

import asyncio

import pytest
from kanban_kit import Clock, database
from postgres import BACKENDS

from hermes_engine.ports.storage import CardSpec, CardUsage

pytestmark = pytest.mark.parametrize("backend", BACKENDS)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def make(backend, tmp_path):
    async with database(backend, tmp_path) as factory:
        yield factory


@pytest.fixture
async def board(make, clock):
    store = make(clock=clock)
    await store.init()
    try:
        yield store
    finally:
        await store.close()


async def test_a_dependency_cycle_in_a_batch_is_refused_and_nothing_is_created(board):
    specs = [CardSpec("a", key="a", depends_on=("c",)), CardSpec("b", key="b", depends_on=("a",)),
             CardSpec("c", key="c", depends_on=("b",))]
    with pytest.raises(ValueError, match="cycle"):
        await board.create_cards(specs, actor="test")
    assert await board.list_cards() == []


async def test_a_dependency_closing_a_cycle_between_existing_cards_is_refused(board):
    a, b = await board.create_cards([CardSpec("a", key="a"), CardSpec("b", key="b", depends_on=("a",))],
                                    actor="test")
    with pytest.raises(ValueError, match="cycle"):
        await board.add_dependency(a.id, b.id, actor="test")
    with pytest.raises(ValueError, match="cycle"):
        await board.add_dependency(a.id, a.id, actor="test")
    assert (await board.get_card(a.id)).depends_on == ()


async def test_a_card_waits_until_its_dependencies_are_done(board):
    a, b = await board.create_cards([CardSpec("a", key="a"), CardSpec("b", key="b", depends_on=("a",))],
                                    actor="test")
    assert await board.promote_ready("default") == [a.id]
    [claimed] = await board.claim_cards("default", "h", lease_seconds=60, max_running=3)
    assert await board.promote_ready("default") == []
    await board.finish_attempt(a.id, claimed.claim, ok=True, result="A done")
    assert await board.promote_ready("default") == [b.id]


async def test_two_claimers_never_get_the_same_card(board, make, clock):
    await board.create_cards([CardSpec(f"card {i}", status="ready") for i in range(40)], actor="test")
    others = [make(clock=clock) for _ in range(3)]  # other processes on the same database
    for s in others:
        await s.init()
    try:
        stores = [board, *others]
        rounds = await asyncio.gather(*(
            s.claim_cards("default", f"holder-{i}-{r}", lease_seconds=60, max_running=100, limit=5)
            for r in range(3) for i, s in enumerate(stores)))
    finally:
        for s in others:
            await s.close()
    ids = [c.id for batch in rounds for c in batch]
    assert len(ids) == len(set(ids)) == 40


async def test_claims_stop_at_the_per_profile_limit(board):
    await board.create_cards([CardSpec(f"c{i}", status="ready") for i in range(5)]
                             + [CardSpec("other", profile="other", status="ready")], actor="test")
    assert len(await board.claim_cards("default", "h", lease_seconds=60, max_running=3)) == 3
    assert await board.claim_cards("default", "h", lease_seconds=60, max_running=3) == []
    assert len(await board.claim_cards("other", "h", lease_seconds=60, max_running=3)) == 1


async def test_two_failures_in_a_row_block_the_card_with_the_reason(board):
    [card] = await board.create_cards([CardSpec("flaky", status="ready")], actor="test")
    [first] = await board.claim_cards("default", "h", lease_seconds=60, max_running=3)
    after_one = await board.finish_attempt(card.id, first.claim, ok=False, handoff={"error": "model said no"})
    assert after_one.status == "ready"
    [second] = await board.claim_cards("default", "h", lease_seconds=60, max_running=3)
    blocked = await board.finish_attempt(card.id, second.claim, ok=False, handoff={"error": "timeout calling X"})
    assert blocked.status == "blocked"
    assert "2 failed attempts" in blocked.reason and "timeout calling X" in blocked.reason
    failed = [e for e in await board.card_events(card.id) if e.kind == "failed"]
    assert [e.handoff["error"] for e in failed] == ["model said no", "timeout calling X"]


async def test_an_expired_claim_is_reclaimed_and_its_old_attempt_cannot_finish_the_card(board, clock):
    [card] = await board.create_cards([CardSpec("slow", status="ready")], actor="test")
    [first] = await board.claim_cards("default", "dead", lease_seconds=2, max_running=3)
    clock.advance(1)
    assert await board.heartbeat_card(card.id, first.claim, lease_seconds=2)
    clock.advance(1.5)
    assert await board.reclaim_stale("default") == []  # the heartbeat kept it
    clock.advance(1)
    [reclaimed] = await board.reclaim_stale("default")
    assert reclaimed.status == "ready" and "lease expired" in reclaimed.reason
    [second] = await board.claim_cards("default", "alive", lease_seconds=2, max_running=3)
    assert second.attempts == 2
    assert await board.finish_attempt(card.id, first.claim, ok=True, result="late") is None
    assert not await board.heartbeat_card(card.id, first.claim, lease_seconds=2)
    done = await board.finish_attempt(card.id, second.claim, ok=True, result="on time")
    assert done.status == "done" and done.result == "on time"
    assert await board.finish_attempt(card.id, second.claim, ok=True, result="twice") is None
    kinds = [e.kind for e in await board.card_events(card.id)]
    assert kinds.count("completed") == 1 and kinds.count("reclaimed") == 1


async def test_a_person_moving_a_blocked_card_back_resets_the_breaker_and_is_recorded(board):
    [card] = await board.create_cards([CardSpec("x", status="ready")], actor="test")
    for _ in range(2):
        [c] = await board.claim_cards("default", "h", lease_seconds=60, max_running=3)
        await board.finish_attempt(card.id, c.claim, ok=False, handoff={"error": "boom"})
    moved = await board.move_card(card.id, "ready", actor="telegram:42", reason="try again")
    assert moved.status == "ready" and moved.failures == 0
    last = (await board.card_events(card.id))[-1]
    assert (last.actor, last.from_status, last.to_status, last.reason) == ("telegram:42", "blocked", "ready",
                                                                          "try again")


async def test_each_attempts_spending_is_kept_and_summed_on_the_card(board):
    [card] = await board.create_cards([CardSpec("c", profile="p")], actor="test")
    await board.record_card_usage(card.id, 1, CardUsage(1000, 200, 3), actor="h#1")
    await board.record_card_usage(card.id, 2, CardUsage(500, 50, 1), actor="h#2")
    assert (await board.get_card(card.id)).spent == CardUsage(1500, 250, 4)
    per_attempt = [(e.handoff["attempt"], e.handoff["tokens_in"], e.handoff["model_calls"])
                   for e in await board.card_events(card.id) if e.kind == "usage"]
    assert per_attempt == [(1, 1000, 3), (2, 500, 1)]


async def test_a_split_by_an_attempt_that_lost_its_claim_creates_nothing(board, clock):
    [card] = await board.create_cards([CardSpec("c", profile="p", status="ready")], actor="test")
    [claimed] = await board.claim_cards("p", "h", lease_seconds=5, max_running=1)
    clock.advance(6)
    await board.reclaim_stale("p")
    assert await board.split_card(card.id, claimed.claim, [CardSpec("part", profile="p")], result="",
                                  handoff={}) is None
    assert [c.id for c in await board.list_cards()] == [card.id]
