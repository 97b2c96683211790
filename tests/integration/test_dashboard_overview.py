"""The Overview's replicas and faults: leases live in the store shown by holder, faults every replica counted per
minute summed over the last hour; the real SqlStore on SQLite (and PostgreSQL with `-m postgres`), the real
aiohttp application, and `FaultTally` flushing what `TalliedMetrics` counted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from test_dashboard import Site, db, open_site  # noqa: F401 - db: the backends' fixture

from hermes_gateway.fault_tally import FaultTally, TalliedMetrics
from storage.store import SqlStore


@pytest.fixture
async def site(tmp_path: Path, db: str) -> AsyncIterator[Site]:  # noqa: F811 - db is the fixture imported above
    async for opened in open_site(tmp_path, db=db):
        yield opened


async def test_faults_of_two_replicas_add_up_within_the_hour_and_older_ones_are_left_out(site: Site) -> None:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    await site.store.add_faults({(now, "429:telegram"): 2, (now, "error:provider"): 1})
    await site.store.add_faults({(now, "429:telegram"): 3})  # another replica, the same minute
    await site.store.add_faults({(now - timedelta(hours=2), "error:storage"): 7})
    assert await site.store.faults_since(now - timedelta(hours=1)) == {"429:telegram": 5, "error:provider": 1}

    page = await (await site.client.get("/admin/")).text()
    assert "sign in" in page.lower()  # not signed in yet: nothing shown
    await site.sign_in()
    page = await (await site.client.get("/admin/")).text()
    assert "<td>429:telegram</td><td>5</td>" in page and "<td>error:provider</td><td>1</td>" in page
    assert "error:storage" not in page


async def test_counts_older_than_a_day_are_deleted_when_more_are_added(site: Site) -> None:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    await site.store.add_faults({(now - timedelta(days=2), "429:slack"): 4})
    await site.store.add_faults({(now, "429:slack"): 1})
    assert await site.store.faults_since(now - timedelta(days=3)) == {"429:slack": 1}


async def test_replicas_are_shown_with_the_leases_they_hold_and_expired_ones_are_not(site: Site) -> None:
    a, a_too, b, gone = "host-a:1a2b3c4d:100:5000:x1", "host-a:1a2b3c4d:100:5000:x2", "host-b::7:0:", "host-c::9:0:"
    await site.store.acquire_lease("session:bot:telegram:1:dm:42", a, 60)
    await site.store.acquire_lease("telegram-poller:bot", a_too, 60)  # the same process under another name
    await site.store.acquire_lease("job:7", b, 60)
    await site.store.acquire_lease("inbox-prune", "ran recently", 60)
    await site.store.acquire_lease("goal:3", gone, 0.01)
    await asyncio.sleep(0.05)  # its lease expired
    leases = await site.store.live_leases()
    assert {(lease.name, lease.holder) for lease in leases} == {
        ("session:bot:telegram:1:dm:42", a), ("telegram-poller:bot", a_too), ("job:7", b),
        ("inbox-prune", "ran recently")}
    await site.sign_in()
    page = await (await site.client.get("/admin/")).text()
    assert '<td class="holder">host-a (pid 100)</td>\n      <td>session 1, telegram-poller 1</td>' in page
    assert '<td class="holder">host-b (pid 7)</td>\n      <td>job 1</td>' in page
    assert "Ran this interval, on one replica: inbox-prune." in page
    assert "host-c" not in page
    assert "dm:42" not in page  # a lease's name says whose chat it is: the page shows only its family


async def test_a_tally_keeps_what_it_could_not_add_and_adds_it_at_the_next_flush(site: Site, tmp_path) -> None:
    tally = FaultTally()
    metrics = TalliedMetrics(tally)
    metrics.rate_limited("discord")
    metrics.error("bot", "provider")
    metrics.rate_limited("discord")
    closed = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'no.db'}")  # a directory that is not there
    await tally.flush(closed)
    await closed.close()
    await tally.flush(site.store)
    since = datetime.now(UTC) - timedelta(minutes=5)
    assert await site.store.faults_since(since) == {"429:discord": 2, "error:provider": 1}
    await tally.flush(site.store)  # nothing new: nothing added twice
    assert await site.store.faults_since(since) == {"429:discord": 2, "error:provider": 1}
    assert b"hermes_platform_rate_limited_total{platform=\"discord\"} 2.0" in metrics.exposition()[0]  # the Prometheus series still count
