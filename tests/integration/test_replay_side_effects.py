"""A turn replayed after a crash goes on from what it stored and never runs a tool call again whose result
was stored: a real `hermes-gateway chat` process is killed with SIGKILL after a tool's result is stored,
while its next model call hangs; the restarted engine answers with the recorded result in front of the
model, and the tool's side effect (a memory entry in MEMORY.md) exists once.

The model after the restart is scripted like a real one: what it does not see done, it does again (in its
own words, so a second run would show as a second entry)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from engine_harness import fake_llm_environment, make_profile, stored_tool_results
from fakes.fake_llm import Reply

pytestmark = pytest.mark.slow  # kills a real process: `pytest -m slow`

TEA = "Likes green tea"
AGAIN = "Likes green tea, as said before"
ASK = "remember that I like green tea"


def remember(content: str) -> Reply:
    return Reply(tool_calls=[("memory", {"action": "add", "target": "memory", "content": content})])


def memory_entries(home: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(home.rglob("MEMORY.md")))


async def killed_mid_turn(fake_llm, home: Path, first_life, *, tool_results: int) -> list[str]:
    """Run `chat` in a real process with `first_life` as the model, say ASK, and SIGKILL it once
    `tool_results` results are stored and the next model call hangs. Returns the stored results."""
    fake_llm.responder = first_life
    env = {**os.environ, **fake_llm_environment(fake_llm), "HERMES_HOME": str(home), "HERMES_MODEL": "openai:gpt-test"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hermes_gateway.cli.main", "chat", env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        proc.stdin.write(f"{ASK}\n".encode())
        await proc.stdin.drain()
        for _ in range(1200):  # up to a minute: the child imports everything first
            stored = await asyncio.to_thread(stored_tool_results, home)
            if len(stored) >= tool_results and len(fake_llm.requests) > tool_results:
                break
            await asyncio.sleep(0.05)
        assert len(stored) == tool_results, (await proc.stderr.read()).decode()[-2000:]
    finally:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    fake_llm.requests.clear()
    return stored


def hangs() -> Reply:
    return Reply(text="this answer never finishes", delay=30)


def redoes_what_it_does_not_see_done(request: Any) -> Reply:
    """After the restart: a tool result in view means the work is done; a turn that starts over (the
    question last) or an interrupted call gets the memory call again, in other words."""
    last = request.messages[-1]
    if last["role"] == "user" or "[interrupted" in str(last.get("content")):
        return remember(AGAIN)
    return Reply(text="Noted: green tea.")


async def test_a_tool_result_stored_before_a_kill_is_not_run_again_and_the_model_sees_it(engine, fake_llm,
                                                                                         tmp_path):
    def first_life(request):
        return remember(TEA) if not any(m["role"] == "tool" for m in request.messages) else hangs()

    stored = await killed_mid_turn(fake_llm, tmp_path, first_life, tool_results=1)
    assert TEA in memory_entries(tmp_path)

    fake_llm.responder = redoes_what_it_does_not_see_done
    e = await engine(profile=make_profile(name="default"), platform="console")
    delivered = await e.outlet.wait_for(1)
    await e.idle()

    assert delivered[0].text == "Noted: green tea."
    sent = [m for m in fake_llm.requests[0].messages if m["role"] != "system"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[2]["content"] == stored[0]  # the recorded result, not an "interrupted" one
    assert memory_entries(tmp_path).count(TEA) == 1 and AGAIN not in memory_entries(tmp_path)


async def test_a_long_turn_killed_late_resumes_where_it_was_instead_of_starting_over(engine, fake_llm, tmp_path):
    """Thirty calculations after the memory call: the turn's stored messages run far past its question.
    The replay still finds the question stored, so the model is not asked it a second time."""
    steps = 30

    def first_life(request):
        done = sum(1 for m in request.messages if m["role"] == "tool")
        if done == 0:
            return remember(TEA)
        if done <= steps:
            return Reply(tool_calls=[("calculate", {"expression": f"{done} * 2"})])
        return hangs()

    await killed_mid_turn(fake_llm, tmp_path, first_life, tool_results=steps + 1)

    fake_llm.responder = redoes_what_it_does_not_see_done
    e = await engine(profile=make_profile(name="default"), platform="console")
    delivered = await e.outlet.wait_for(1)
    await e.idle()

    assert delivered[0].text == "Noted: green tea."
    sent = fake_llm.requests[0].messages
    assert [m["content"] for m in sent if m["role"] == "user"] == [ASK]
    assert sent[-1]["role"] == "tool" and sent[-1]["content"] == str(steps * 2)
    assert memory_entries(tmp_path).count(TEA) == 1 and AGAIN not in memory_entries(tmp_path)
