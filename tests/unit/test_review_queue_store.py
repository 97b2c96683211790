"""The review queue on SQLite and PostgreSQL: one due review per session, marked before it runs by any
replica, cleared only for the version that ran.

    eval "$(.ci/postgres.sh)"     # starts a local server and exports HERMES_TEST_POSTGRES_URL
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from postgres import BACKENDS, replica_stores

from storage.store import SqlStore

BOT = "testbot"
SCOPE = {"chat_kind": "dm", "shared_scope": None,
         "target": {"platform": "test", "account": "acct", "chat_id": "c1", "thread_id": None}}


@pytest.fixture(params=BACKENDS)
async def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[list[SqlStore]]:
    """Two stores on one database, as two replicas of the gateway would have."""
    async with replica_stores(request.param, tmp_path) as stores:
        yield stores


async def session_of(store: SqlStore, key: str = "test:acct:dm:c1") -> tuple[int, int]:
    """(session id, person id) of a session with one person in it."""
    person = (await store.resolve_account("test", "acct", "u1", "u1")).person_id
    return (await store.active_session(key, BOT)).id, person


async def test_a_marked_review_is_due_with_what_running_it_needs(replicas):
    a, b = replicas
    session_id, person = await session_of(a)
    marked = await a.mark_review_due(BOT, session_id, session_key="test:acct:dm:c1", person_id=person,
                                     memory=True, skill=False, scope=SCOPE)
    [due] = await b.due_reviews(BOT)  # seen by the other replica
    assert due == marked
    assert (due.session_key, due.person_id, due.memory, due.skill, due.scope) == (
        "test:acct:dm:c1", person, True, False, SCOPE)
    assert await b.due_reviews("otherbot") == []
    assert await b.due_reviews(BOT, session_id=session_id + 1) == []


async def test_marking_a_due_review_again_keeps_one_record_with_both_prompts(replicas):
    a, b = replicas
    session_id, person = await session_of(a)
    first, second = await asyncio.gather(
        a.mark_review_due(BOT, session_id, session_key="k", person_id=person, memory=True, skill=False, scope=SCOPE),
        b.mark_review_due(BOT, session_id, session_key="k", person_id=person, memory=False, skill=True, scope=SCOPE))
    [due] = await a.due_reviews(BOT)
    assert (due.memory, due.skill) == (True, True)
    assert sorted([first.version, second.version]) == [1, 2] and due.version == 2
    assert due.due_at == min(first.due_at, second.due_at)  # due since the first mark


async def test_clearing_names_the_version_that_ran_so_a_later_mark_stays_due(replicas):
    a, b = replicas
    session_id, person = await session_of(a)
    ran = await a.mark_review_due(BOT, session_id, session_key="k", person_id=person, memory=True, skill=False,
                                  scope=SCOPE)
    await b.mark_review_due(BOT, session_id, session_key="k", person_id=person, memory=True, skill=False,
                            scope=SCOPE)  # marked again while the first ran
    assert not await a.clear_review(BOT, session_id, ran.version)
    [due] = await b.due_reviews(BOT)
    assert await b.clear_review(BOT, session_id, due.version)
    assert await a.due_reviews(BOT) == []
    assert not await a.clear_review(BOT, session_id, due.version)  # cleared once


async def test_due_reviews_come_oldest_first_one_per_session(replicas):
    a, _ = replicas
    older, person = await session_of(a, "k1")
    newer, _ = await session_of(a, "k2")
    for session_id in (older, newer, older):
        await a.mark_review_due(BOT, session_id, session_key=f"k{session_id}", person_id=person, memory=True,
                                skill=False, scope=SCOPE)
        await asyncio.sleep(0.01)  # distinct marking times
    assert [d.session_id for d in await a.due_reviews(BOT)] == [older, newer]


async def test_a_forgotten_persons_due_review_goes_with_them(replicas):
    a, _ = replicas
    session_id, person = await session_of(a)
    await a.mark_review_due(BOT, session_id, session_key="k", person_id=person, memory=True, skill=False,
                            scope=SCOPE)
    await a.forget_person(person)
    assert await a.due_reviews(BOT) == []
