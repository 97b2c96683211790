"""What `hermes-gateway run` logs at the default level: one line per turn, no line per poll or probe."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
from engine_harness import fake_llm_environment
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def run_gateway_for_two_dms(fake_llm, tmp_path: Path, **env_extra: str) -> tuple[list[str], FakeTelegram]:
    """Start the real process, have it answer two DMs, poll Telegram and be probed; return its log lines."""
    fake_llm.responder = lambda request: Reply(text="Hello from the gateway.", usage={"input": 120, "output": 7})
    port = free_port()
    async with FakeTelegram() as telegram:
        env = {name: value for name, value in os.environ.items() if not name.startswith("HERMES_LOG")}
        env = {**env, **fake_llm_environment(fake_llm), "HERMES_HOME": str(tmp_path),
               "HERMES_MODEL": "openai:gpt-test", "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": str(port),
               "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url,
               "TELEGRAM_ALLOWED_USERS": "4242", "HERMES_LOG_LEVEL": "INFO", **env_extra}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hermes_gateway.cli.main", "run", "--bot", "bots/telegram-dm-assistant", cwd=ROOT,
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            telegram.user_says(4242, 4242, "hi there")
            await telegram.wait_for_messages(4242, 1, timeout=60)
            telegram.user_says(4242, 4242, "and again")
            await telegram.wait_for_messages(4242, 2, timeout=60)
            assert sum(call.method == "getUpdates" for call in telegram.requests) >= 2  # polls were made
            async with aiohttp.ClientSession(trust_env=False) as http:
                for path in ("/health", "/ready", "/health"):
                    async with http.get(f"http://127.0.0.1:{port}{path}") as response:
                        assert response.status == 200, path
        finally:
            proc.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, stderr.decode()[-2000:]
        return stderr.decode().splitlines(), telegram


async def test_run_logs_one_line_per_turn_and_no_line_per_poll_or_probe(fake_llm, tmp_path):
    lines, telegram = await run_gateway_for_two_dms(fake_llm, tmp_path)
    text = "\n".join(lines)
    assert "getUpdates" not in text and "HTTP Request" not in text, text
    assert "GET /health" not in text and "GET /ready" not in text, text
    turns = [line for line in lines if "turn answered for person" in line and "on telegram" in line]
    assert len(turns) == 2, text
    assert all("120 tokens in" in line and "7 out" in line for line in turns), turns
    assert telegram.token.split(":")[1] not in text


async def test_run_logs_json_lines_with_the_turn_fields_when_asked(fake_llm, tmp_path):
    lines, telegram = await run_gateway_for_two_dms(fake_llm, tmp_path, HERMES_LOG_FORMAT="json")
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    turns = [r for r in records if r.get("event") == "turn"]
    assert len(turns) == 2, records
    for turn in turns:
        assert turn["level"] == "INFO" and turn["platform"] == "telegram" and turn["outcome"] == "answered"
        assert isinstance(turn["person_id"], int) and isinstance(turn["latency_ms"], int)
        assert (turn["tokens_in"], turn["tokens_out"]) == (120, 7)
    assert not any("getUpdates" in r["message"] or "GET /health" in r["message"] for r in records)
    assert telegram.token.split(":")[1] not in "\n".join(lines)
