"""/goal end to end through each adapter besides Slack (its own suite covers it) and Discord (test_discord.py
has its /goal test): the terminal chat as a real subprocess, and Telegram with the real Application against
the fake Bot API. The judge says continue, then done; the person sees every turn's answer and the done
message."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from engine_harness import fake_llm_environment, is_judge, make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeUser

from adapters.telegram import PLATFORM, TelegramAdapter
from hermes_engine.loops.goals import CONTINUE_PREFIX

ROOT = Path(__file__).resolve().parents[2]
GOAL = "make a checklist"
# python-telegram-bot warns about its own RetryAfter.retry_after type change when it builds the error.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


def continue_then_done():
    """Judge: continue, then done. Worker: a numbered checklist step per turn. Returns (responder, state)."""
    state = {"judge": 0, "worker": []}

    def respond(request):
        if is_judge(request):
            state["judge"] += 1
            verdict = "continue" if state["judge"] == 1 else "done"
            reason = "one item left" if verdict == "continue" else "the checklist is complete"
            return Reply(text=json.dumps({"verdict": verdict, "reason": reason}))
        state["worker"].append(request.last_user_text)
        n = len(state["worker"])
        return Reply(text=f"Checklist part {n}: item {n}a, item {n}b.")

    return respond, state


# ------------------------------------------------------------------------------------------ terminal


async def _console(fake_llm, home: Path) -> asyncio.subprocess.Process:
    env = {**os.environ, **fake_llm_environment(fake_llm), "HERMES_MODEL": "openai:gpt-test",
           "HERMES_HOME": str(home)}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hermes_gateway.cli.main", "chat", cwd=ROOT, env=env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def _read_until(proc: asyncio.subprocess.Process, lines: list[str], marker: str, timeout: float = 60) -> None:
    async def read() -> None:
        while not any(marker in line for line in lines):
            raw = await proc.stdout.readline()
            if not raw:
                raise AssertionError(f"the chat ended before {marker!r}: {lines!r}")
            lines.append(raw.decode().rstrip("\n"))

    await asyncio.wait_for(read(), timeout)


async def test_terminal_chat_goal_runs_each_turn_and_reports_done(fake_llm, tmp_path):
    fake_llm.responder, state = continue_then_done()
    proc = await _console(fake_llm, tmp_path)
    lines: list[str] = []
    try:
        proc.stdin.write(f"/goal {GOAL}\n".encode())
        await proc.stdin.drain()
        await _read_until(proc, lines, "✅ Goal done")  # stdin stays open while the goal works
        proc.stdin.write(b"/goal status\n")
        await proc.stdin.drain()
        await _read_until(proc, lines, "Status: done")
        await _read_until(proc, lines, "2. done: the checklist is complete")
        proc.stdin.close()
        rest, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    lines += rest.decode().splitlines()
    assert lines[:7] == [
        f"🎯 Goal set: {GOAL}",
        "I will work on it turn by turn and tell you when it is done.",
        "Checklist part 1: item 1a, item 1b.",
        "Checklist part 2: item 2a, item 2b.",
        f"✅ Goal done: {GOAL}",
        "the checklist is complete",
        f"Goal: {GOAL}",
    ]
    assert "Turns used: 2" in lines and "1. continue: one item left" in lines
    assert state["worker"] == [GOAL, f"{CONTINUE_PREFIX} {GOAL}"] and state["judge"] == 2


async def test_piped_terminal_chat_finishes_the_goal_before_exiting_at_end_of_input(fake_llm, tmp_path):
    fake_llm.responder, state = continue_then_done()
    proc = await _console(fake_llm, tmp_path)
    out, err = await asyncio.wait_for(proc.communicate(f"/goal {GOAL}\n".encode()), 60)  # EOF right away
    assert proc.returncode == 0, err.decode()
    assert out.decode().splitlines() == [
        f"🎯 Goal set: {GOAL}",
        "I will work on it turn by turn and tell you when it is done.",
        "Checklist part 1: item 1a, item 1b.",
        "Checklist part 2: item 2a, item 2b.",
        f"✅ Goal done: {GOAL}",
        "the checklist is complete",
    ]
    assert state["judge"] == 2


# ------------------------------------------------------------------------------------------ Telegram

FAST = {"edit_interval_seconds": 0.05, "group_interval_seconds": 0.05, "poll_timeout": 1, "poll_backoff": 0.2,
        "poll_backoff_max": 1.0, "send_backoff": 0.1, "send_backoff_max": 0.5}
ALICE = FakeUser(42, "Alice", "alice")


@pytest.fixture
async def telegram_bot(engine, telegram):
    """A gateway (every default feature, /goal included) with a started Telegram adapter; stopped first."""
    profile = make_profile(access={"allowed_users": ["42"]}, platforms={"telegram": FAST})
    e = await engine(profile=profile)
    adapter: TelegramAdapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(FAST), None, os.environ)
    e.gateway.attach(adapter)
    await adapter.start()
    await asyncio.wait_for(adapter.ready.wait(), 5)
    yield e
    await adapter.stop()


async def test_telegram_dm_goal_shows_each_turn_the_done_message_and_the_status(telegram_bot, telegram, fake_llm):
    e = telegram_bot
    fake_llm.responder, state = continue_then_done()
    telegram.user_says(42, ALICE, f"/goal {GOAL}")
    await telegram.wait_for(lambda: any(t.startswith("✅ Goal done") for t in telegram.chat(42).bot_texts), 10,
                            "no done message in the chat")
    await e.idle()
    await telegram.settle()
    assert telegram.chat(42).bot_texts == [
        f"🎯 Goal set: {GOAL}\nI will work on it turn by turn and tell you when it is done.",
        "Checklist part 1: item 1a, item 1b.",
        "Checklist part 2: item 2a, item 2b.",
        f"✅ Goal done: {GOAL}\nthe checklist is complete",
    ]
    assert state["worker"] == [GOAL, f"{CONTINUE_PREFIX} {GOAL}"]

    telegram.user_says(42, ALICE, "/goal status")
    status = await telegram.wait_for(
        lambda: next((t for t in telegram.chat(42).bot_texts if t.startswith(f"Goal: {GOAL}")), None), 5)
    assert status.splitlines() == [f"Goal: {GOAL}", "Status: done", "Turns used: 2", status.splitlines()[3],
                                   "Verdicts:", "1. continue: one item left", "2. done: the checklist is complete"]
    assert status.splitlines()[3].startswith("Tokens spent: ")
    assert len(fake_llm.requests) == 4  # two worker turns, two judge calls; /goal status asks no model
