"""The configuration is checked before anything happens: a newcomer's mistake is one sentence naming the
setting and what to do, exit status 2, no traceback and nothing created on disk; a fallback model without
its key is left out and never stands between a person and the primary model. The commands that stop run in
this process (`cli_kit.invoke_beside`); the gateway that serves is a process."""

from __future__ import annotations

import asyncio
import os
import socket
import sys

import aiohttp
import pytest
from cli_kit import ROOT, free_port, invoke_beside
from engine_harness import fake_llm_environment
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram
from home_kit import service_home
from postgres import BACKENDS, PG_URL

BOT = str(ROOT / "bots" / "telegram-dm-assistant")
PG = PG_URL or "postgresql+asyncpg://hermes:hermes@127.0.0.1:5432/hermes_test"


def only_anthropic(fake_llm) -> dict[str, str]:
    """What the README's Telegram section has a newcomer export: the Anthropic key, nothing for OpenAI."""
    return {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake_llm.anthropic_base_url}


def assert_one_sentence(err: str, *parts: str) -> None:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for part in parts:
        assert part in lines[0], lines[0]


async def test_a_fallback_without_its_key_is_left_out_with_one_warning_and_the_primary_answers(fake_llm, tmp_path):
    fake_llm.script(Reply(text="the primary answers"))
    code, out, err = await invoke_beside("chat", "--bot", BOT, stdin="hello\n",
                                         env={**only_anthropic(fake_llm), "HERMES_HOME": str(tmp_path)})
    assert code == 0, err
    assert out.splitlines() == ["the primary answers"]
    assert [r.api for r in fake_llm.requests] == ["anthropic"]
    warnings = [line for line in err.splitlines() if "OPENAI_API_KEY" in line]
    assert len(warnings) == 1 and "openai:gpt-4.1-mini" in warnings[0] and "left out" in warnings[0]


async def test_chat_exits_non_zero_when_a_turn_failed(fake_llm, tmp_path):
    fake_llm.script(Reply(error=400, error_message="bad request"))
    env = {**fake_llm_environment(fake_llm), "HERMES_MODEL": "openai:gpt-test", "HERMES_HOME": str(tmp_path)}
    code, out, err = await invoke_beside("chat", env=env, stdin="hello\n")
    assert "⚠️" in out
    assert code == 1 and "1 turn(s) failed" in err


async def test_run_reports_a_missing_model_key_before_creating_or_migrating_anything(tmp_path):
    home = tmp_path / "home"
    code, _, err = await invoke_beside("run", "--bot", BOT,
                                       env={"HERMES_HOME": str(home), "TELEGRAM_BOT_TOKEN": "1:abc"})
    assert code == 2
    assert_one_sentence(err, "ANTHROPIC_API_KEY is not set")
    assert not home.exists()


@pytest.mark.parametrize(("url", "says"), [
    ("nonsense", "HERMES_DATABASE_URL is not a database URL"),
    ("mysql://u:p@127.0.0.1/x", "HERMES_DATABASE_URL names the database driver"),
    ("postgresql+asyncpg://hermes:hermes@127.0.0.1:1/hermes_test", "PostgreSQL at 127.0.0.1:1 cannot be reached"),
    pytest.param(PG.replace("hermes:hermes@", "hermes:wrong-password@"), "refused the user 'hermes'",
                 marks=BACKENDS[1].marks, id="wrong-password"),
])
async def test_a_bad_or_refusing_database_is_one_sentence_exit_2_and_nothing_on_disk(fake_llm, tmp_path, url, says):
    home = tmp_path / "home"
    env = {**only_anthropic(fake_llm), "HERMES_HOME": str(home), "HERMES_DATABASE_URL": url,
           "HERMES_HTTP_PORT": str(free_port()), "TELEGRAM_BOT_TOKEN": "1:abc"}
    code, _, err = await invoke_beside("run", "--bot", BOT, env=env)
    assert code == 2
    assert_one_sentence(err, says, "HERMES_DATABASE_URL")
    assert "wrong-password" not in err
    assert not home.exists()


async def test_an_http_port_in_use_is_one_sentence_exit_2(fake_llm, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**only_anthropic(fake_llm), "HERMES_HOME": str(tmp_path / "home"), "HERMES_HTTP_PORT": str(port),
               "TELEGRAM_BOT_TOKEN": "1:abc"}
        code, _, err = await invoke_beside("run", "--bot", BOT, env=env)
    assert code == 2
    assert_one_sentence(err, f"HERMES_HTTP_PORT {port}", "already in use")
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize(("telegram_block", "says"), [
    ("    colour: red\n", "platforms.telegram.colour"),
    ("    mode: webhook\n", "TELEGRAM_WEBHOOK_SECRET"),
])
async def test_an_unknown_or_wrong_platform_option_stops_the_start_in_one_sentence(fake_llm, tmp_path,
                                                                                   telegram_block, says):
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "profile.yaml").write_text(f"model: anthropic:claude-test\nplatforms:\n  telegram:\n{telegram_block}")
    env = {**only_anthropic(fake_llm), "HERMES_HOME": str(tmp_path / "home"), "HERMES_HTTP_PORT": str(free_port()),
           "TELEGRAM_BOT_TOKEN": "1:abc"}
    code, _, err = await invoke_beside("run", "--bot", str(bot), env=env)
    assert code == 2
    assert_one_sentence(err, says)
    assert not (tmp_path / "home").exists()
    code, out, _ = await invoke_beside("doctor", "--bot", str(bot), env=env)
    assert code == 1 and says in out


async def test_doctor_says_what_each_missing_key_is_for(tmp_path):
    code, out, _ = await invoke_beside("doctor", "--bot", BOT, env={"HERMES_HOME": str(tmp_path / "home")})
    assert code == 1
    assert "FIX   ANTHROPIC_API_KEY is not set: export it or choose another model with HERMES_MODEL." in out
    assert "WARN  OPENAI_API_KEY: the key of the fallback model openai:gpt-4.1-mini, is not set" in out
    assert not (tmp_path / "home").exists()


async def test_ready_names_a_platform_that_is_not_connected_and_health_only_says_the_process_lives(fake_llm,
                                                                                                   tmp_path):
    port = free_port()
    async with FakeTelegram() as telegram:
        env = {**os.environ, **only_anthropic(fake_llm), "HERMES_HOME": str(tmp_path), "HERMES_HTTP_PORT": str(port),
               "TELEGRAM_BOT_TOKEN": telegram.token, "TELEGRAM_API_BASE_URL": telegram.base_url}
        telegram.hold("deleteWebhook")  # the bot is known (getMe) but cannot start receiving yet
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "hermes_gateway.cli.main", "run", "--bot", BOT, cwd=ROOT, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            async with aiohttp.ClientSession(trust_env=False) as http:
                health = await _get_when_up(http, f"http://127.0.0.1:{port}/health")
                assert health == (200, {"status": "ok"})
                ready = await _get_when_up(http, f"http://127.0.0.1:{port}/ready")
                assert ready == (503, {"status": "unavailable", "reason": "telegram is not connected"})
                telegram.release()
                poller = f"telegram-poller:{telegram.token.split(':')[0]}"  # elected even when alone
                assert await _ready(http, f"http://127.0.0.1:{port}/ready", poller) == {
                    "status": "ready", "roles": {poller: "leader"}}
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.communicate(), 60)


async def _ready(http: aiohttp.ClientSession, url: str, role: str) -> dict:
    """The readiness body once it is 200 and names `role` (503 until the platform connects; the poller's
    election is settled a moment after)."""
    body: dict = {}
    for _ in range(600):
        status, body = await _get_when_up(http, url)
        if status == 200 and body.get("roles", {}).get(role, "starting") != "starting":
            return body
        await asyncio.sleep(0.1)
    raise AssertionError(f"{url} never said ready with {role}: {body}")


async def _get_when_up(http: aiohttp.ClientSession, url: str) -> tuple[int, dict]:
    for _ in range(600):  # the process imports and starts; wait for its server, not for a fixed time
        try:
            async with http.get(url) as response:
                body = await response.json()
                if not body.get("reason", "").startswith("starting"):
                    return response.status, body
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"{url} never answered")


def test_people_without_a_subcommand_lists_everyone_with_their_platform_accounts(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from hermes_gateway.cli.main import app
    from hermes_gateway.cli.people import with_store

    monkeypatch.setenv("HERMES_HOME", str(service_home(tmp_path / "home")))
    ann = with_store(lambda store: store.resolve_account("telegram", "bot", "12345", "Ann")).person_id
    bob = with_store(lambda store: store.resolve_account("slack", "bot", "U123", "Bob")).person_id
    listed = CliRunner().invoke(app, ["people"])
    assert listed.exit_code == 0, listed.output
    assert f"{ann:>6}  Ann  telegram:12345 (bot account bot)" in listed.output
    assert f"{bob:>6}  Bob  slack:U123 (bot account bot)" in listed.output


async def test_an_unknown_log_level_is_one_sentence_naming_the_variable(fake_llm, tmp_path):
    env = {**only_anthropic(fake_llm), "HERMES_HOME": str(tmp_path / "home"), "HERMES_LOG_LEVEL": "loud"}
    code, _, err = await invoke_beside("run", env=env)
    assert code == 2
    assert_one_sentence(err, "HERMES_LOG_LEVEL is invalid", "DEBUG, INFO, WARNING, ERROR, CRITICAL")
