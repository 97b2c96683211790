"""The usage ledger on SQLite and PostgreSQL: counts per bot, person and day, added atomically so two
replicas counting at once both count.

    eval "$(.ci/postgres.sh)"     # starts a local server and exports HERMES_TEST_POSTGRES_URL
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from postgres import BACKENDS, replica_stores
from sqlalchemy.pool import NullPool

from hermes_engine.ports.storage import ModelSpend, UsageCount
from storage import migrate
from storage.engine import make_engine
from storage.store import SqlStore

DAY, NEXT_DAY = date(2026, 3, 1), date(2026, 3, 2)


@pytest.fixture(params=BACKENDS)
async def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[SqlStore]]:
    """Two stores on one database, as two replicas of the gateway would have."""
    async with replica_stores(request.param, tmp_path) as stores:
        yield stores


async def person(store: SqlStore, user: str) -> int:
    return (await store.resolve_account("test", "acct", user, user)).person_id


async def test_counts_added_at_once_from_two_replicas_all_count(replicas: list[SqlStore]) -> None:
    a, b = replicas
    alice = await person(a, "alice")

    async def count(store: SqlStore) -> None:
        await store.add_usage("bot", alice, DAY, turns=1, tokens=10)

    await asyncio.gather(*(count(store) for store in (a, b) for _ in range(15)))
    assert await a.usage_of("bot", alice, DAY) == UsageCount(turns=30, tokens=300)
    assert await b.usage_of("bot", alice, DAY) == UsageCount(turns=30, tokens=300)


async def test_counts_are_kept_apart_per_bot_person_and_day_and_totals_sum_the_people(
        replicas: list[SqlStore]) -> None:
    store = replicas[0]
    alice, bob = await person(store, "alice"), await person(store, "bob")
    adds: list[tuple[str, int, date, dict[str, Any]]] = [
        ("bot", alice, DAY, {"turns": 2}), ("bot", alice, DAY, {"tokens": 500}), ("bot", bob, DAY, {"turns": 1}),
        ("other", alice, DAY, {"turns": 7}), ("bot", alice, NEXT_DAY, {"turns": 3})]
    for bot, who, day, amounts in adds:
        await store.add_usage(bot, who, day, **amounts)

    assert await store.usage_of("bot", alice, DAY) == UsageCount(turns=2, tokens=500)
    assert await store.usage_of("bot", bob, DAY) == UsageCount(turns=1, tokens=0)
    assert await store.usage_of("bot", alice, NEXT_DAY) == UsageCount(turns=3, tokens=0)
    assert await store.usage_total("bot", DAY) == UsageCount(turns=3, tokens=500)
    assert await store.usage_total("nobody", DAY) == UsageCount()


async def test_two_replicas_at_a_turn_limit_let_exactly_the_limit_through(replicas: list[SqlStore]) -> None:
    a, b = replicas
    alice = await person(a, "alice")
    counted = await asyncio.gather(*(store.count_turn("bot", alice, DAY, max_turns=10)
                                     for store in (a, b) for _ in range(15)))
    assert counted.count(True) == 10
    assert await a.usage_of("bot", alice, DAY) == UsageCount(turns=10, tokens=0)


async def test_a_turn_is_refused_once_the_day_used_its_tokens_and_counted_again_the_next_day(
        replicas: list[SqlStore]) -> None:
    store = replicas[0]
    alice = await person(store, "alice")
    assert await store.count_turn("bot", alice, DAY, max_tokens=1000)
    await store.add_usage("bot", alice, DAY, tokens=1000)
    assert not await store.count_turn("bot", alice, DAY, max_turns=5, max_tokens=1000)
    assert await store.count_turn("bot", alice, NEXT_DAY, max_turns=5, max_tokens=1000)
    assert await store.usage_of("bot", alice, DAY) == UsageCount(turns=1, tokens=1000)


async def test_merging_a_person_adds_their_counts_to_the_kept_persons_for_each_bot_and_day(
        replicas: list[SqlStore]) -> None:
    store = replicas[0]
    alice, bob, carol = [await person(store, name) for name in ("alice", "bob", "carol")]
    adds: list[tuple[str, int, date, dict[str, Any]]] = [
        ("bot", alice, DAY, {"turns": 2, "tokens": 100}), ("bot", bob, DAY, {"turns": 1, "tokens": 50}),
        ("other", bob, DAY, {"turns": 4}), ("bot", bob, NEXT_DAY, {"turns": 3}),
        ("bot", carol, DAY, {"turns": 9})]
    for bot, who, day, amounts in adds:
        await store.add_usage(bot, who, day, **amounts)

    await store.merge_usage(alice, bob)
    assert await store.usage_of("bot", alice, DAY) == UsageCount(turns=3, tokens=150)
    assert await store.usage_of("other", alice, DAY) == UsageCount(turns=4, tokens=0)  # a day alice had no row
    assert await store.usage_of("bot", alice, NEXT_DAY) == UsageCount(turns=3, tokens=0)
    assert await store.usage_of("bot", bob, DAY) == UsageCount()  # moved, not copied: the totals stay
    assert await store.usage_total("bot", DAY) == UsageCount(turns=12, tokens=150)
    assert await store.usage_of("bot", carol, DAY) == UsageCount(turns=9, tokens=0)
    assert not await store.count_turn("bot", alice, DAY, max_turns=3)  # the joined count holds the limit


async def test_merging_a_person_into_themselves_changes_nothing(replicas: list[SqlStore]) -> None:
    store = replicas[0]
    alice = await person(store, "alice")
    await store.add_usage("bot", alice, DAY, turns=2)
    await store.merge_usage(alice, alice)
    assert await store.usage_of("bot", alice, DAY) == UsageCount(turns=2, tokens=0)


def spend(model: str, cost: int, **tokens: int) -> ModelSpend:
    return ModelSpend(model, cost_micros=cost, **tokens)


async def test_cost_is_added_per_day_and_per_model_and_summed_over_a_month(replicas: list[SqlStore]) -> None:
    a, b = replicas
    alice, bob = await person(a, "alice"), await person(a, "bob")
    first = date(2026, 3, 1)
    for store in (a, b):  # two replicas adding the same model's share at once both count
        await store.add_usage("bot", alice, DAY, tokens=150, cost_micros=700,
                              models=[spend("openai:gpt-4.1-mini", 500, input_tokens=100, cache_read_tokens=20),
                                      spend("anthropic:claude-sonnet-4-5", 200, output_tokens=30)])
    await a.add_usage("bot", alice, NEXT_DAY, tokens=10, cost_micros=40, models=[spend("openai:gpt-4.1-mini", 40)])
    await a.add_usage("bot", bob, DAY, tokens=5, cost_micros=9, models=[spend("openai:gpt-4.1-mini", 9)])

    assert await a.usage_of("bot", alice, DAY) == UsageCount(turns=0, tokens=300, cost_micros=1400)
    assert await a.usage_between("bot", alice, first, NEXT_DAY) == UsageCount(tokens=310, cost_micros=1440)
    assert await a.usage_between("bot", None, DAY, DAY) == UsageCount(tokens=305, cost_micros=1409)
    assert await a.spend_between("bot", alice, DAY, DAY) == [
        spend("openai:gpt-4.1-mini", 1000, input_tokens=200, cache_read_tokens=40),
        spend("anthropic:claude-sonnet-4-5", 400, output_tokens=60)]
    month = await b.spend_between("bot", None, first, NEXT_DAY)
    assert [(s.model, s.cost_micros) for s in month] == [("openai:gpt-4.1-mini", 1049),
                                                          ("anthropic:claude-sonnet-4-5", 400)]


async def test_a_turn_is_refused_once_the_day_spent_its_dollars(replicas: list[SqlStore]) -> None:
    store = replicas[0]
    alice = await person(store, "alice")
    assert await store.count_turn("bot", alice, DAY, max_cost_micros=5_000_000)
    await store.add_usage("bot", alice, DAY, tokens=10, cost_micros=5_000_000)
    assert not await store.count_turn("bot", alice, DAY, max_tokens=1000, max_cost_micros=5_000_000)
    assert await store.count_turn("bot", alice, NEXT_DAY, max_cost_micros=5_000_000)


async def test_merging_a_person_joins_their_cost_and_their_models_shares(replicas: list[SqlStore]) -> None:
    store = replicas[0]
    alice, bob = await person(store, "alice"), await person(store, "bob")
    await store.add_usage("bot", alice, DAY, turns=1, cost_micros=100, models=[spend("m:a", 100, input_tokens=1)])
    await store.add_usage("bot", bob, DAY, turns=1, cost_micros=30,
                          models=[spend("m:a", 10, input_tokens=2), spend("m:b", 20, output_tokens=3)])
    await store.merge_usage(alice, bob)
    assert await store.usage_of("bot", alice, DAY) == UsageCount(turns=2, cost_micros=130)
    assert await store.spend_between("bot", alice, DAY, DAY) == [spend("m:a", 110, input_tokens=3),
                                                                 spend("m:b", 20, output_tokens=3)]
    assert await store.spend_between("bot", bob, DAY, DAY) == []


async def test_days_counted_before_costs_were_kept_read_as_nothing_spent(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}"
    await migrate.upgrade(url, "0018")
    engine = make_engine(url, poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            await conn.exec_driver_sql("INSERT INTO people (id, display_name, created_at) "
                                       "VALUES (1, 'Ann', '2026-03-01 00:00:00')")
            await conn.exec_driver_sql("INSERT INTO usage_days (bot, person_id, day, turns, tokens) "
                                       "VALUES ('bot', 1, '2026-03-01', 4, 400)")
    finally:
        await engine.dispose()
    await migrate.upgrade(url)
    async with SqlStore(url) as store:
        assert await store.usage_of("bot", 1, DAY) == UsageCount(turns=4, tokens=400, cost_micros=0)
        await store.add_usage("bot", 1, DAY, cost_micros=25, models=[spend("m:a", 25, output_tokens=1)])
        assert await store.usage_of("bot", 1, DAY) == UsageCount(turns=4, tokens=400, cost_micros=25)
