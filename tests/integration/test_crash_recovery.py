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

pytestmark = pytest.mark.slow  # kills a real process: `pytest -m slow`


async def test_killed_process_loses_nothing_persisted_and_answers_after_restart(engine, fake_llm, tmp_path):
    def first_life(request):
        if not any(m["role"] == "tool" for m in request.messages):
            return Reply(tool_calls=[("calculate", {"expression": "6*7"})])
        return Reply(text="this answer never finishes", delay=30)

    fake_llm.responder = first_life
    env = {**os.environ, **fake_llm_environment(fake_llm), "HERMES_HOME": str(tmp_path),
           "HERMES_MODEL": "openai:gpt-test"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hermes_gateway.cli.main", "chat", env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    proc.stdin.write(b"what is six times seven?\n")
    await proc.stdin.drain()
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
