"""A process killed mid-turn loses nothing it had persisted, and the message is answered after restart.

The kill comes once the tool step is stored: steps are written behind, so one killed before its write
lands is lost by design (and redone after the restart)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest
from engine_harness import fake_llm_environment, make_profile, stored_tool_results
from fakes.fake_llm import Reply
from gateway_kit import database_url
from postgres import BACKENDS

from hermes_engine.providers.continuation import CONTINUE
from storage.store import SqlStore

pytestmark = pytest.mark.slow  # kills a real process: `pytest -m slow`

FIRST, REST = "The first part of the answer, cut in the mid", "dle of a word and finished after the restart."


async def chat_saying(line: bytes, fake_llm, home, model: str, db_url: str | None = None) -> asyncio.subprocess.Process:
    """A real `hermes-gateway chat` process on `model` and the fake LLM, told `line` (on `db_url`, if given)."""
    env = {**os.environ, **fake_llm_environment(fake_llm), "HERMES_HOME": str(home), "HERMES_MODEL": model,
           **({"HERMES_DATABASE_URL": db_url} if db_url else {})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hermes_gateway.cli.main", "chat", env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(line)
    await proc.stdin.drain()
    return proc


async def test_killed_process_loses_nothing_persisted_and_answers_after_restart(engine, fake_llm, tmp_path):
    def first_life(request):
        if not any(m["role"] == "tool" for m in request.messages):
            return Reply(tool_calls=[("calculate", {"expression": "6*7"})])
        return Reply(text="this answer never finishes", delay=30)

    fake_llm.responder = first_life
    proc = await chat_saying(b"what is six times seven?\n", fake_llm, tmp_path, "openai:gpt-test")
    for _ in range(1200):  # up to a minute: the child imports everything first
        if len(fake_llm.requests) >= 2:
            break
        await asyncio.sleep(0.05)
    assert len(fake_llm.requests) == 2, (await proc.stderr.read()).decode()[-2000:]
    for _ in range(200):  # the tool step is written behind, while the next model call goes on
        if await asyncio.to_thread(stored_tool_results, tmp_path):
            break
        await asyncio.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()

    fake_llm.requests.clear()
    fake_llm.responder = lambda request: Reply(text="It is 42.")
    e = await engine(profile=make_profile(name="default"), platform="console")
    delivered = await e.outlet.wait_for(1)
    assert delivered[0].text == "It is 42."
    sent = fake_llm.requests[0].messages
    roles = [m["role"] for m in sent if m["role"] != "system"]
    assert roles == ["user", "assistant", "tool"]  # said once, tool work kept, no half answer
    assert next(m for m in sent if m["role"] == "tool")["content"] == "42"


async def assistant_contents(db_url: str) -> list[str]:
    """What the store holds of the assistant's messages, read as another process would."""
    store = SqlStore(db_url)
    await store.init()
    try:
        return [m.content for session_id in await store.export_session_ids()
                for m in await store.load_messages(session_id) if m.role == "assistant"]
    finally:
        await store.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_answer_cut_at_the_output_limit_before_a_kill_goes_on_from_its_stored_part(engine, fake_llm,
                                                                                          tmp_path, backend):
    async with database_url(backend, tmp_path) as db_url:
        sent, delivered = await cut_answer_killed_and_resumed(engine, fake_llm, tmp_path, db_url)
    assert delivered == FIRST + REST
    assert sent.texts == ["tell me everything", FIRST, CONTINUE]  # asked once, going on from the stored part


async def cut_answer_killed_and_resumed(engine, fake_llm, tmp_path, db_url: str):
    """Kill a `chat` process after the first part of a cut answer is stored, then start an engine on the same
    store: (the one model request it makes, the text it delivered)."""
    first = FIRST

    def first_life(request):
        if request.last_user_text == CONTINUE:
            return Reply(text="this part never finishes", delay=30)
        return Reply(text=first, at_limit=True)

    fake_llm.responder = first_life
    proc = await chat_saying(b"tell me everything\n", fake_llm, tmp_path, "anthropic:claude-sonnet-4-5", db_url)
    for _ in range(1200):  # up to a minute: the child imports everything first
        if len(fake_llm.requests) >= 2 and await assistant_contents(db_url):
            break
        await asyncio.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    assert await assistant_contents(db_url) == [first]

    fake_llm.requests.clear()
    fake_llm.responder = lambda request: Reply(text=REST)
    e = await engine(profile=make_profile(name="default", model="anthropic:claude-sonnet-4-5"), platform="console",
                     database=(db_url, {}))
    delivered = await e.outlet.wait_for(1)
    [sent] = fake_llm.requests
    return sent, delivered[0].text
