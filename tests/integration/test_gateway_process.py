"""`hermes-gateway run` as an operator starts it: a real process, its HTTP server, a platform, a shutdown."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
from engine_harness import fake_llm_environment
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def answered_turns(http: aiohttp.ClientSession, port: int) -> list[tuple[str, float]]:
    """(platform, count) of answered turns at /metrics, once there are any: a reply shows a moment before
    its turn is complete."""
    for _ in range(400):
        async with http.get(f"http://127.0.0.1:{port}/metrics") as response:
            assert response.status == 200
            text = await response.text()
        answered = [(s.labels["platform"], s.value) for family in text_string_to_metric_families(text)
                    for s in family.samples if s.name == "hermes_turns_total" and s.labels["outcome"] == "answered"]
        if answered:
            return answered
        await asyncio.sleep(0.025)
    return []


async def test_run_serves_a_telegram_dm_answers_health_and_metrics_and_stops_cleanly(fake_llm, tmp_path):
    fake_llm.responder = lambda request: Reply(text="Hello from the gateway.")
    port = free_port()
    async with FakeTelegram() as telegram:
        env = {**os.environ, **fake_llm_environment(fake_llm), "HERMES_HOME": str(tmp_path),
               "HERMES_MODEL": "openai:gpt-test", "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": str(port),
               "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url,
               "TELEGRAM_ALLOWED_USERS": "4242"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hermes_gateway.cli.main", "run", "--bot", "bots/telegram-dm-assistant", cwd=ROOT,
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            telegram.user_says(4242, 4242, "hi there")
            reply = await telegram.wait_for_text(4242, "Hello from the gateway.", timeout=60)
            assert reply.text == "Hello from the gateway."
            async with aiohttp.ClientSession(trust_env=False) as http:
                async with http.get(f"http://127.0.0.1:{port}/health") as response:
                    assert response.status == 200 and (await response.json()) == {"status": "ok"}
                assert await answered_turns(http, port) == [("telegram", 1.0)]
        finally:
            proc.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, stderr.decode()[-2000:]
        assert telegram.chat(4242).bot_texts == ["Hello from the gateway."]


async def test_a_reply_streaming_when_sigterm_comes_is_finished_before_the_process_exits(fake_llm, tmp_path):
    answer = "One two three four five six seven eight nine ten."
    fake_llm.responder = lambda request: Reply(text=answer, delay=0.3)
    port = free_port()
    async with FakeTelegram() as telegram, aiohttp.ClientSession(trust_env=False) as http:
        env = {**os.environ, **fake_llm_environment(fake_llm), "HERMES_HOME": str(tmp_path),
               "HERMES_MODEL": "openai:gpt-test", "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": str(port),
               "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url,
               "TELEGRAM_ALLOWED_USERS": "4242", "HERMES_LOG_LEVEL": "INFO"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hermes_gateway.cli.main", "run", "--bot", "bots/telegram-dm-assistant", cwd=ROOT,
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        readiness: list[tuple[int, dict]] = []
        try:
            telegram.user_says(4242, 4242, "count to ten")
            await telegram.wait_for_messages(4242, 1, timeout=60)  # the first streamed frame is in the chat
            assert telegram.chat(4242).bot_texts != [answer]
            proc.send_signal(signal.SIGTERM)
            while not readiness or readiness[-1][0] == 200:  # the reply streams on for seconds meanwhile
                async with http.get(f"http://127.0.0.1:{port}/ready") as response:
                    readiness.append((response.status, await response.json()))
                await asyncio.sleep(0.02)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            _, stderr = await asyncio.wait_for(proc.communicate(), 60)
        status, said = readiness[-1]
        assert status == 503 and said["reason"].endswith("stopping")  # a load balancer sends elsewhere now
        assert proc.returncode == 0, stderr.decode()[-2000:]
        assert telegram.chat(4242).bot_texts == [answer], stderr.decode()[-3000:]
        assert "turn answered for person" in stderr.decode(), stderr.decode()[-3000:]
