"""How often a plain turn on an existing conversation goes to the store, counted where SQLAlchemy hands each
statement to the driver (`round_trips.py`), through the real gateway on SQLite and on PostgreSQL. The bound is
the turn's own work: the inbox record, one journal write of its messages, the completion and the usage ledger;
a read of what this process has just written, or a lease taken per turn, would show here."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from engine_harness import make_profile
from fakes.fake_llm import Reply
from postgres import BACKENDS, empty_database
from round_trips import TripCounter, stop_the_clock

ROUND_TRIPS_PER_TURN = 4


@pytest.fixture(params=BACKENDS)
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    async with empty_database(request.param, str(tmp_path / "hermes.db")) as place:
        yield place


async def test_a_plain_turn_on_an_existing_conversation_makes_at_most_four_store_round_trips(
        engine, fake_llm, database, monkeypatch):
    # Leases renewed and the inbox looked over for takeovers every 200 s: none of that falls into a turn.
    monkeypatch.setenv("HERMES_SESSION_LEASE_SECONDS", "600")
    profile = make_profile(review={"memory_every_turns": 0, "skill_every_iterations": 0})
    e = await engine(profile=profile, database=database)
    await e.say("hello")  # the conversation exists from here on
    await e.idle()
    assert e.store is not None and e.gateway is not None
    await stop_the_clock(e.gateway)
    counter = TripCounter(e.store)
    per_turn = []
    with counter.counting():
        for i in range(5):
            fake_llm.script(Reply(text=f"answer {i}"))
            before = counter.snapshot()
            assert await e.say(f"question {i}") == f"answer {i}"
            await e.idle()
            per_turn.append(counter.snapshot().minus(before))
    worst = max(per_turn, key=lambda t: t.transactions)
    assert worst.transactions <= ROUND_TRIPS_PER_TURN, "\n".join(worst.sql)
    assert all(t.transactions >= 3 for t in per_turn)  # the record, the journal and the completion were seen
