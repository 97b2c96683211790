"""A store that cannot write stops the spending: on a real full filesystem (a small tmpfs as `HERMES_HOME`,
SQLite database and files on it) the bot stops at the first failed write, tells the person once, makes no
model call while nothing can be stored, says so on `/ready`, and answers normally once space is freed.
File writes of tools (memory, skills) on a full disk are tool errors the model reads; the turn goes on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from engine_harness import make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeUser

from adapters.telegram import PLATFORM as TELEGRAM
from hermes_engine.core.storage_health import StorageHealth
from hermes_engine.errors import StorageError
from hermes_gateway.serve import health_app

NOTICE = "⚠️ I can't save anything right now (the disk is full), so I'm pausing; please try again later."


class Tmpfs:
    """A small tmpfs mounted at `path`, which a test fills up and frees again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def fill(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            while True:
                os.write(fd, b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == 28  # ENOSPC: full
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink()


@contextlib.contextmanager
def mounted_tmpfs(path: Path, size: str = "4m") -> Iterator[Tmpfs]:
    path.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        pytest.skip(f"a full filesystem needs a tmpfs mount, and mounting is not permitted here: {detail}")
    try:
        yield Tmpfs(path)
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=False, capture_output=True)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Tmpfs]:
    """`HERMES_HOME` on its own small filesystem (requested before `engine`, so unmounted after it)."""
    with mounted_tmpfs(tmp_path / "home") as fs:
        yield fs


@pytest.fixture
async def ready_endpoint() -> Any:
    """`await ready_endpoint(health)` → a function that GETs `/ready` of a real server and returns
    (status, JSON body)."""
    clients: list[TestClient] = []

    async def serve(health: StorageHealth) -> Callable[[], Awaitable[tuple[int, dict[str, Any]]]]:
        client = TestClient(TestServer(health_app(health)))
        await client.start_server()
        clients.append(client)

        async def get() -> tuple[int, dict[str, Any]]:
            response = await client.get("/ready")
            return response.status, await response.json()

        return get

    yield serve
    for client in clients:
        await client.close()


def shown(e, since: int) -> list[str]:
    """What the person saw after delivery number `since` (an aborted, empty reply shows nothing)."""
    return [d.text for d in e.outlet.delivered[since:] if d.text]


async def test_a_full_disk_pauses_the_bot_tells_the_chat_once_and_it_answers_again_once_space_is_freed(
        disk, engine, fake_llm, ready_endpoint):
    fake_llm.responder = lambda request: Reply(text="hello there")
    e = await engine(home=disk.path)
    ready = await ready_endpoint(e.gateway.storage_health)
    assert await e.say("hi") == "hello there"
    await e.idle()
    assert await ready() == (200, {"status": "ready"})

    disk.fill()
    calls, seen = len(fake_llm.requests), len(e.outlet.delivered)
    for text in ("are you there?", "hello??", "anyone?"):
        with pytest.raises(StorageError):  # not recorded: a platform that redelivers keeps it
            await e.gateway.handle(e.message(text))
        await e.idle()

    assert len(fake_llm.requests) - calls <= 1  # at most the call already under way when the write failed
    assert shown(e, seen) == [NOTICE]  # once for this chat, not once a message
    status, body = await ready()
    assert status == 503 and body["reason"] == "the store cannot write: the disk is full"

    disk.free()
    assert await e.say("back now?") == "hello there"
    assert await ready() == (200, {"status": "ready"})
    assert fake_llm.requests[-1].last_user_text == "back now?"


@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
async def test_telegram_updates_redelivered_during_an_outage_cost_no_model_calls_and_are_answered_after_it(
        disk, engine, fake_llm, telegram):
    """As reported: two messages on a full disk. Telegram hands the unrecorded updates out again and again;
    none of that may reach the model, the chat is told once, and both are answered once space is back."""
    alice = FakeUser(42, "Alice", "alice")
    fake_llm.responder = lambda request: Reply(text=f"you said: {request.last_user_text}")
    options = {"poll_timeout": 1, "poll_backoff": 0.05, "poll_backoff_max": 0.2, "poll_jitter": 0}
    e = await engine(home=disk.path, profile=make_profile(access={"allowed_users": ["42"]},
                                                          platforms={"telegram": options}))
    adapter = TELEGRAM.build(e.gateway, e.settings, TELEGRAM.parse_options(options), None, os.environ)
    e.gateway.attach(adapter)
    await adapter.start()
    try:
        telegram.user_says(42, alice, "hi")
        await telegram.wait_for_text(42, "you said: hi")
        await e.idle()
        disk.fill()
        calls, outage_from = len(fake_llm.requests), len(telegram.requests)
        telegram.user_says(42, alice, "are you there?")
        second = telegram.user_says(42, alice, "hello??")["update_id"]
        await telegram.wait_for(lambda: telegram.delivered_update_ids.count(second) >= 5, timeout=30,
                                message="Telegram kept handing out the unrecorded updates")
        fetches = [c.time for c in telegram.requests[outage_from:] if c.method == "getUpdates"]
        # Fetching works but recording does not: the adapter backs off (0.05 s growing to 0.2 s), it does
        # not start over at the shortest wait after every successful fetch.
        assert fetches[-1] - fetches[-2] >= 0.15

        assert len(fake_llm.requests) - calls <= 1
        await telegram.wait_for(lambda: len(telegram.chat(42).bot_texts) == 2)
        assert telegram.chat(42).bot_texts == ["you said: hi", NOTICE]

        disk.free()
        await telegram.wait_for_text(42, "you said: hello??", timeout=30)
        await e.idle()
        assert telegram.chat(42).bot_texts == ["you said: hi", NOTICE, "you said: are you there?",
                                               "you said: hello??"]
    finally:
        await adapter.stop()


async def test_a_write_failing_mid_turn_stops_the_turn_instead_of_letting_the_model_go_on(disk, engine, fake_llm):
    """The inbox and the first step are stored; then the disk fills while the model works. The turn must
    stop at the failed write, not go on calling the model until its step limit and fail at the end. (Writes
    are behind the turn, so the next call may already be on its way when the write fails: the fake holds
    that one until the failure is known, so what follows is the engine's doing, not a race.)"""
    turn_calls = []
    e = None

    async def respond(request):
        if request.last_user_text == "hi":
            return Reply(text="hello there")
        turn_calls.append(request)
        if len(turn_calls) == 2:  # the inbox write is done: the first step waited for it
            disk.fill()
        elif len(turn_calls) == 3:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_until(lambda: not e.gateway.storage_health.ok), 10)
        elif len(turn_calls) > 4:
            return Reply(text="done counting")  # enough to fail the test: no need to go on to the step limit
        return Reply(tool_calls=[("calculate", {"expression": f"{len(turn_calls)} + 1"})])

    fake_llm.responder = respond
    e = await engine(home=disk.path, profile=make_profile(max_iterations=30))
    assert await e.say("hi") == "hello there"
    await e.idle()
    seen = len(e.outlet.delivered)

    assert await e.gateway.handle(e.message("count for me"))  # recorded before the disk filled
    await e.idle()

    assert len(turn_calls) <= 3  # the call that met the full disk, and at most the next one already sent
    assert shown(e, seen) == [NOTICE]
    assert not e.gateway.storage_health.ok


async def test_a_turn_paused_by_an_outage_is_answered_once_writing_works_again_without_a_restart(
        disk, engine, fake_llm):
    filled = []

    def respond(request):
        if request.last_user_text == "count for me" and not filled:
            filled.append(disk.fill())  # the disk fills while the model works on this turn
            return Reply(tool_calls=[("calculate", {"expression": "1 + 1"})])
        return Reply(text=f"answer to {request.last_user_text}")

    fake_llm.responder = respond
    e = await engine(home=disk.path)
    assert await e.say("hi") == "answer to hi"
    await e.idle()
    seen = len(e.outlet.delivered)
    assert await e.gateway.handle(e.message("count for me"))  # recorded; its turn meets the full disk
    await e.idle()
    assert shown(e, seen) == [NOTICE] and not e.gateway.storage_health.ok

    disk.free()
    assert await e.gateway.handle(e.message("back now?"))  # its probe write finds the store writing again
    await e.idle()
    # The paused turn goes first, then the message that found the store back: in the order they were sent.
    assert shown(e, seen) == [NOTICE, "answer to count for me", "answer to back now?"]
    assert await e.store.pending_inbound() == []


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():  # noqa: ASYNC110 - the health object raises no event; the fake polls it
        await asyncio.sleep(0.01)


async def test_memory_and_skill_writes_on_a_full_disk_are_tool_errors_and_the_turn_goes_on(tmp_path, engine,
                                                                                            fake_llm):
    skill = ("---\nname: tea-notes\ndescription: Brew green tea.\nversion: 1.0.0\ncategory: general\n---\n\n"
             "## When to use\nTea.\n\n## Steps\n1. Brew at 80 C.\n\n## Pitfalls\n- Not boiling water.\n")
    requests = []

    def respond(request):
        requests.append(request)
        if len(requests) == 1:
            return Reply(tool_calls=[
                ("memory", {"action": "add", "target": "memory", "content": "Likes green tea"}),
                ("skill_manage", {"action": "create", "name": "tea-notes", "content": skill, "category": "general"})])
        return Reply(text="I could not save that, sorry.")

    fake_llm.responder = respond
    with mounted_tmpfs(tmp_path / "memories", "1m") as memories, mounted_tmpfs(tmp_path / "skills", "1m") as skills:
        e = await engine(home=tmp_path)  # the database stays on the roomy disk
        memories.fill()
        skills.fill()
        answer = await e.say("remember that I like green tea, and save how to brew it")
        await e.idle()
        await e.stop()  # before the mounts go

    assert answer == "I could not save that, sorry."
    results = {m["tool_call_id"]: m["content"] for m in requests[1].messages if m["role"] == "tool"}
    assert len(results) == 2
    memory_result, skill_result = results.values()
    assert memory_result.startswith("Error: memory could not be saved")
    assert skill_result.startswith("Error") and "No space left on device" in skill_result
    assert e.gateway.storage_health.ok


async def test_ready_says_starting_until_the_gateways_have_started_and_health_stays_as_it_was():
    started = asyncio.Event()
    async with TestClient(TestServer(health_app(None, started))) as client:
        response = await client.get("/ready")
        assert response.status == 503 and await response.json() == {"status": "unavailable", "reason": "starting"}
        started.set()
        response = await client.get("/ready")
        assert response.status == 200 and await response.json() == {"status": "ready"}
        response = await client.get("/health")
        assert response.status == 200 and await response.json() == {"status": "ok"}
