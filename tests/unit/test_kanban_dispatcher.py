"""The dispatcher's phases against the real store, on SQLite and PostgreSQL, with attempts scripted in
place of model runs: who leads, what a crashed worker leaves behind, how many triage cards a tick splits."""

from __future__ import annotations

import asyncio

import pytest
from kanban_kit import Clock, database
from postgres import BACKENDS

from hermes_engine.config import KanbanSettings
from hermes_engine.kanban.attempt import AttemptEnd
from hermes_engine.kanban.dispatcher import Dispatcher
from hermes_engine.ports.storage import CardRecord, CardSpec

pytestmark = pytest.mark.parametrize("backend", BACKENDS)

SETTINGS = KanbanSettings(tick_seconds=60, lease_seconds=10)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def stores(backend, tmp_path, clock):
    """Two stores on one database: two processes sharing a board."""
    async with database(backend, tmp_path) as make:
        pair = [make(clock=clock), make(clock=clock)]
        for s in pair:
            await s.init()
        try:
            yield pair
        finally:
            for s in pair:
                await s.close()


def completing(store):
    async def attempt(card: CardRecord, claim: str) -> AttemptEnd:
        return AttemptEnd(await store.finish_attempt(card.id, claim, ok=True, result="ok"), True)
    return attempt


async def settle(dispatcher: Dispatcher) -> None:
    await asyncio.gather(*(task for _claim, task in dispatcher.workers.values()), return_exceptions=True)


async def test_one_dispatcher_leads_a_board_until_its_lease_runs_out(stores, clock):
    one = Dispatcher(stores[0], "p", SETTINGS, completing(stores[0]), holder="one")
    two = Dispatcher(stores[1], "p", SETTINGS, completing(stores[1]), holder="two")
    [card] = await stores[0].create_cards([CardSpec("c", profile="p", status="ready")], actor="test")
    assert (await one.tick()).started == [card.id]
    report = await two.tick()
    assert not report.leader and report.started == []
    await settle(one)
    clock.advance(one.lease_ttl + 1)  # `one` stopped ticking (its process died)
    assert (await two.tick()).leader
    assert not (await one.tick()).leader


async def test_the_board_lease_shows_in_the_metrics_of_the_replica_that_leads_it(stores, clock):
    from hermes_gateway.metrics import PrometheusMetrics

    seen = [PrometheusMetrics(), PrometheusMetrics()]  # one registry per replica
    one, two = (Dispatcher(store, "p", SETTINGS, completing(store), holder=name, metrics=metrics)
                for store, name, metrics in zip(stores, ("one", "two"), seen, strict=True))

    def held() -> list[float | None]:
        return [m.registry.get_sample_value("hermes_leases_held", {"job": "kanban-dispatcher:p"}) for m in seen]

    await one.tick()
    await two.tick()
    assert held() == [1, None]
    clock.advance(one.lease_ttl + 1)
    await two.tick()
    await one.tick()
    assert held() == [0, 1]
    await two.stop()
    assert held() == [0, 0]


async def test_a_worker_that_crashed_fails_its_attempt_at_the_next_tick(stores):
    store = stores[0]

    async def crashing(card: CardRecord, claim: str) -> AttemptEnd:
        raise RuntimeError("segfault in a tool")

    dispatcher = Dispatcher(store, "p", SETTINGS, crashing, holder="h")
    [card] = await store.create_cards([CardSpec("c", profile="p", status="ready")], actor="test")
    await dispatcher.tick()
    await settle(dispatcher)
    report = await dispatcher.tick()
    assert report.crashed == [card.id]
    assert report.started == [card.id]  # and it is tried again at once
    await dispatcher.stop()
    events = await store.card_events(card.id)
    failed = [e for e in events if e.kind == "failed"]
    assert "segfault in a tool" in failed[0].handoff["error"] and failed[0].handoff["attempt"] == 1


async def test_a_tick_splits_at_most_the_configured_number_of_triage_cards(stores):
    store = stores[0]
    split: list[int] = []

    async def decompose(card: CardRecord) -> None:
        split.append(card.id)
        await store.move_card(card.id, "todo", actor="triage")

    dispatcher = Dispatcher(store, "p", KanbanSettings(decompose_per_tick=3, max_in_progress_per_profile=1),
                            completing(store), holder="h", decompose=decompose)
    cards = await store.create_cards([CardSpec(f"t{i}", profile="p", status="triage") for i in range(5)],
                                     actor="test")
    first = await dispatcher.tick()
    assert first.decomposed == [c.id for c in cards[:3]]
    assert first.started == [cards[0].id]  # split, promoted and claimed in the same tick, one at a time
    await settle(dispatcher)
    assert (await dispatcher.tick()).decomposed == [c.id for c in cards[3:]]


def recording(batches: list[tuple[str, list[int]]]):
    async def on_batch(kind, cards) -> None:
        batches.append((kind, [c.id for c in cards]))
    return on_batch


async def test_cards_claimed_together_are_announced_in_one_batch(stores):
    store, batches = stores[0], []
    dispatcher = Dispatcher(store, "p", KanbanSettings(max_in_progress_per_profile=50), completing(store),
                            holder="h", on_batch=recording(batches))
    cards = await store.create_cards([CardSpec(f"c{i}", profile="p", status="ready") for i in range(50)],
                                     actor="test")
    await dispatcher.tick()
    await settle(dispatcher)
    assert batches == [("started", [c.id for c in cards])]


async def test_cards_whose_workers_stopped_are_announced_once_as_taken_back(stores, clock):
    store, batches = stores[0], []
    dead = await store.create_cards([CardSpec(f"c{i}", profile="p", status="ready") for i in range(2)],
                                    actor="test")
    await store.claim_cards("p", "dead-process", lease_seconds=5, max_running=3)  # then the process died
    clock.advance(6)
    dispatcher = Dispatcher(store, "p", SETTINGS, completing(store), holder="h", on_batch=recording(batches))
    await dispatcher.tick()
    await settle(dispatcher)
    ids = [c.id for c in dead]
    assert batches == [("taken back", ids), ("started", ids)]


async def test_a_card_waiting_for_its_parts_is_blocked_when_a_part_is_blocked(stores):
    store = stores[0]
    [parent] = await store.create_cards([CardSpec("whole", profile="p", status="ready")], actor="test")
    [claimed] = await store.claim_cards("p", "h", lease_seconds=60, max_running=3)
    _, parts = await store.split_card(parent.id, claimed.claim, [CardSpec("a", profile="p"), CardSpec("b", profile="p")],
                                      result="split", handoff={})
    assert (await store.get_card(parent.id)).status == "todo"
    await store.move_card(parts[1].id, "blocked", actor="test", reason="needs a password")
    told: list[CardRecord] = []

    async def on_card(card: CardRecord) -> None:
        told.append(card)

    dispatcher = Dispatcher(store, "p", SETTINGS, completing(store), holder="h", on_card=on_card)
    await dispatcher.tick()
    await settle(dispatcher)
    blocked = await store.get_card(parent.id)
    assert blocked.status == "blocked"
    assert f"#{parts[1].id}" in blocked.reason and "needs a password" in blocked.reason
    assert [c.id for c in told if c.status == "blocked"] == [parent.id]


async def test_a_stop_gives_back_every_card_its_workers_hold_even_one_cut_before_its_attempt_began(stores):
    started = asyncio.Event()

    async def never_ends(card: CardRecord, claim: str) -> AttemptEnd:
        started.set()
        await asyncio.Event().wait()  # cut by the stop before anything of the attempt could give the card back
        raise AssertionError("not reached")

    dispatcher = Dispatcher(stores[0], "p", SETTINGS, never_ends, holder="one")
    [card] = await stores[0].create_cards([CardSpec("c", profile="p", status="ready")], actor="test")
    dispatcher.start()
    await asyncio.wait_for(started.wait(), 10)
    await dispatcher.stop()
    back = await stores[0].get_card(card.id)
    assert (back.status, back.failures, back.claim, back.attempts) == ("ready", 0, None, 1)


async def test_a_stop_ends_the_loop_between_ticks_so_no_card_is_claimed_without_a_worker(stores):
    ended = asyncio.Event()

    async def ends_at_once(card: CardRecord, claim: str) -> AttemptEnd:
        await stores[0].release_card(card.id, claim, reason="test")  # back to ready: the loop's wake claims again
        ended.set()
        await asyncio.Event().wait()
        raise AssertionError("not reached")

    dispatcher = Dispatcher(stores[0], "p", SETTINGS, ends_at_once, holder="one")
    [card] = await stores[0].create_cards([CardSpec("c", profile="p", status="ready")], actor="test")
    dispatcher.start()
    await asyncio.wait_for(ended.wait(), 10)
    dispatcher.poke()  # a tick is due the moment the stop comes
    await dispatcher.stop()
    back = await stores[0].get_card(card.id)
    assert (back.status, back.claim) == ("ready", None)
    assert dispatcher.workers == {}
