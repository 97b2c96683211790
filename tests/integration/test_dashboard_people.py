"""A person's page beyond their memory: usage against the bot's limits as `/status` words it, the background
review's proposals waiting for them, and forgetting them (confirmed, recorded, everything gone); the real
SqlStore on SQLite (and PostgreSQL with `-m postgres`), the real memory rules and aiohttp application."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_dashboard import Site, db, open_site  # noqa: F401 - db: the backends' fixture

from hermes_engine.config import UsageLimitSettings
from hermes_engine.memory.book import Change
from hermes_engine.memory.documents import MemoryOwner
from hermes_engine.memory.pending import PendingChanges


@pytest.fixture
async def site(tmp_path: Path, db: str) -> AsyncIterator[Site]:  # noqa: F811 - db is the fixture imported above
    limits = UsageLimitSettings(turns_per_day=50, tokens_per_day=20_000, cost_per_day=2.5)
    async for opened in open_site(tmp_path, db=db, limits=limits, forgets=True):
        yield opened


async def test_a_persons_usage_today_is_shown_against_the_bots_limits(site: Site) -> None:
    today = datetime.now(UTC).date()
    await site.store.add_usage("bot", site.person_id, today, turns=3, tokens=1234)
    await site.sign_in()
    page = await (await site.client.get(f"/admin/people/{site.person_id}")).text()
    assert "Today: 3 of 50 turns, 1234 of 20000 tokens." in page
    assert "(daily limit $2.50)" in page


async def test_the_reviews_proposals_waiting_for_the_person_are_listed(site: Site) -> None:
    owner = MemoryOwner.person(site.person_id)
    staged = await PendingChanges(site.memory).stage(owner, "memory", [Change.of("remove", None, "Likes tea")])
    assert staged.ok, staged.message
    await site.sign_in()
    page = await (await site.client.get(f"/admin/people/{site.person_id}")).text()
    assert 'remove "Likes tea; secret-memory-entry"' in page.replace("&#34;", '"')
    assert "No changes are waiting" not in page


async def test_forgetting_asks_for_the_tick_and_then_deletes_the_person_and_records_it(site: Site) -> None:
    csrf = await site.sign_in()
    path = f"/admin/people/{site.person_id}/forget"
    unticked = await site.client.post(path, data={"csrf": csrf}, headers={"Origin": site.origin})
    assert unticked.status == 422 and "nothing was deleted" in await unticked.text()
    assert await site.store.get_person(site.person_id) is not None

    done = await site.client.post(path, data={"csrf": csrf, "confirm": "yes"}, headers={"Origin": site.origin},
                                  allow_redirects=False)
    assert done.status == 303 and done.headers["Location"] == f"/admin/people?forgotten={site.person_id}"
    assert await site.store.get_person(site.person_id) is None
    assert await site.memory.entries(MemoryOwner.person(site.person_id), "memory") == []
    change = (await site.store.dashboard_changes())[0]
    assert (change.action, change.subject) == ("person.forget", f"person {site.person_id}")
    listing = await (await site.client.get(f"/admin/people?forgotten={site.person_id}")).text()
    assert f"Person {site.person_id} was forgotten." in listing and "Mallory" not in listing
    again = await site.client.post(path, data={"csrf": csrf, "confirm": "yes"}, headers={"Origin": site.origin})
    assert again.status == 404  # already gone: nothing more to do, said plainly


async def test_forgetting_without_the_csrf_token_deletes_nothing(site: Site) -> None:
    await site.sign_in()
    response = await site.client.post(f"/admin/people/{site.person_id}/forget", data={"confirm": "yes"},
                                      headers={"Origin": site.origin})
    assert response.status == 403
    assert await site.store.get_person(site.person_id) is not None
