"""`hermes-gateway kanban list|show|move|retry` against the gateway's database, as an operator runs it."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from cli_kit import invoke

from hermes_engine.ports.storage import CardSpec, CardUsage
from storage.store import SqlStore


def kanban(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The command in this process (`cli_kit.invoke`), read as a process's result."""
    code, out, err = invoke("kanban", *args, env={"HERMES_HOME": str(home)})
    return subprocess.CompletedProcess(["hermes-gateway", "kanban", *args], code, out, err)


async def _board(home: Path) -> SqlStore:
    store = SqlStore(f"sqlite+aiosqlite:///{home / 'hermes.db'}")
    await store.init()
    return store


async def test_the_cli_lists_shows_moves_and_retries_cards(tmp_path):
    store = await _board(tmp_path)
    try:
        first, second = await store.create_cards([CardSpec("draft the plan", key="a"),
                                                  CardSpec("ship it", key="b", depends_on=("a",))], actor="test")
        await store.move_card(second.id, "blocked", actor="test", reason="the build broke twice")
        await store.record_card_usage(second.id, 1, CardUsage(1200, 300, 4), actor="worker#1")
    finally:
        await store.close()

    listing = await asyncio.to_thread(kanban, "list", home=tmp_path)
    assert listing.returncode == 0
    assert f"#{first.id} draft the plan" in listing.stdout.split("blocked")[0]
    assert f"#{second.id} ship it (after #{first.id}) — the build broke twice" in listing.stdout

    shown = await asyncio.to_thread(kanban, "show", str(second.id), home=tmp_path)
    assert "the build broke twice" in shown.stdout and f"Depends on: #{first.id}" in shown.stdout
    assert "Spent: 1,200 tokens in, 300 out, 4 model calls" in shown.stdout

    moved = await asyncio.to_thread(kanban, "move", str(first.id), "ready", "--reason", "go", home=tmp_path)
    assert moved.stdout.strip() == f"Card #{first.id} is now ready."
    retried = await asyncio.to_thread(kanban, "retry", str(second.id), home=tmp_path)
    assert retried.stdout.strip() == f"Card #{second.id} is now ready."

    bad = await asyncio.to_thread(kanban, "move", str(first.id), "sideways", home=tmp_path)
    assert bad.returncode == 1 and "unknown status 'sideways'" in bad.stderr and "Traceback" not in bad.stderr
    missing = await asyncio.to_thread(kanban, "show", "999", home=tmp_path)
    assert missing.returncode == 1 and "no card 999" in missing.stderr

    store = await _board(tmp_path)
    try:
        events = await store.card_events(second.id)
    finally:
        await store.close()
    assert (events[-1].actor, events[-1].to_status) == ("cli", "ready")


async def test_the_cli_lists_and_shows_every_persons_and_conversations_cards(tmp_path):
    store = await _board(tmp_path)
    try:
        cards = await store.create_cards([CardSpec("Alice's private plan", body="leave in May", owner_id=1),
                                          CardSpec("Bob's errand", owner_id=2),
                                          CardSpec("the release notes", owner_id=2, shared_in="slack:T1:C1"),
                                          CardSpec("from before owners")], actor="test")
    finally:
        await store.close()

    listing = await asyncio.to_thread(kanban, "list", home=tmp_path)
    assert listing.returncode == 0
    assert all(f"#{c.id} {c.title}" in listing.stdout for c in cards)
    shown = await asyncio.to_thread(kanban, "show", str(cards[0].id), home=tmp_path)
    assert shown.returncode == 0 and "leave in May" in shown.stdout
