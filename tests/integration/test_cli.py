"""The command line as a newcomer meets it: one clear sentence for bad configuration, never a traceback. The
commands run in this process (`cli_kit.invoke`); `--version` and a piped chat run as processes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from cli_kit import ROOT, invoke
from engine_harness import fake_llm_environment


def run_cli(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """The command in this process, read as a process's result."""
    code, out, err = invoke(*args, env=env or {}, stdin=stdin)
    return subprocess.CompletedProcess(["hermes-gateway", *args], code, out, err)


def test_version_prints_the_version():
    result = subprocess.run([sys.executable, "-m", "hermes_gateway.cli.main", "--version"], capture_output=True,
                            text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert result.returncode == 0 and result.stdout.startswith("hermes-gateway ")


def test_missing_api_key_is_one_sentence_naming_it():
    result = run_cli("chat", stdin="hi\n")
    assert result.returncode == 2
    assert result.stderr.strip() == ("hermes-gateway: ANTHROPIC_API_KEY is not set: export it or choose another "
                                     "model with HERMES_MODEL.")


def test_bad_model_spec_and_bad_profile_are_one_sentence_each(tmp_path):
    result = run_cli("chat", env={"HERMES_MODEL": "nonsense"}, stdin="hi\n")
    assert result.returncode == 2 and "'nonsense' is not of the form provider:model" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "profile.yaml").write_text("max_iterations: -3\n")
    result = run_cli("chat", "--bot", str(tmp_path / "bot"), stdin="hi\n")
    assert result.returncode == 2 and "max_iterations" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    result = run_cli("run", "--bot", "no-such-bot")
    assert result.returncode == 2 and "no-such-bot" in result.stderr and "Traceback" not in result.stderr


def test_doctor_says_what_is_missing():
    result = run_cli("doctor", "--bot", "bots/telegram-dm-assistant")
    assert result.returncode == 1
    assert "FIX   ANTHROPIC_API_KEY is not set" in result.stdout
    assert "WARN  bot profile 'telegram-dm-assistant': telegram is off: TELEGRAM_BOT_TOKEN is not set" in result.stdout
    assert "FIX   No platform can start: TELEGRAM_BOT_TOKEN is not set" in result.stdout


async def test_piped_chat_answers_one_line_at_a_time(fake_llm, tmp_path):
    from fakes.fake_llm import Reply

    fake_llm.script(Reply(text="first answer"), Reply(text="second answer"))
    env = {**fake_llm_environment(fake_llm), "HERMES_MODEL": "openai:gpt-test", "HERMES_HOME": str(tmp_path)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hermes_gateway.cli.main", "chat", cwd=ROOT, env={**os.environ, **env},
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(b"hello\nand again\n"), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().splitlines() == ["first answer", "second answer"]


def test_inbox_lists_what_waits_for_an_answer_and_what_was_rejected(tmp_path):
    from storage.store import SqlStore

    async def fill() -> None:
        store = SqlStore(f"sqlite+aiosqlite:///{tmp_path / 'hermes.db'}")
        await store.init()
        try:
            await store.record_inbound("telegram", "1:42:7:900", {"purpose": "turn"}, session_key="telegram:1:dm:42")
            await store.record_rejected("telegram", "1:rejected:901", {"reason": "no chat", "raw": '{"message": 5}'})
            await store.record_rejected("telegram", "1:rejected:902", {"reason": "odd \x9b2J", "raw": "\x1b[2J\u202e"})
        finally:
            await store.close()

    asyncio.run(fill())
    env = {"HERMES_HOME": str(tmp_path)}
    waiting = run_cli("inbox", "pending", env=env)
    assert waiting.returncode == 0, waiting.stderr
    assert "telegram  1:42:7:900  turn  telegram:1:dm:42" in waiting.stdout
    refused = run_cli("inbox", "rejected", "--platform", "telegram", env=env)
    assert refused.returncode == 0, refused.stderr
    assert "telegram  1:rejected:901: no chat" in refused.stdout and '{"message": 5}' in refused.stdout
    assert "1:rejected:902: odd \\x9b2J\n    \\x1b[2J\\u202e" in refused.stdout  # no terminal control reaches the operator
    assert not any(c in refused.stdout for c in "\x1b\x9b\u202e")
    assert run_cli("inbox", "rejected", "--platform", "slack", env=env).stdout.strip() == "No event was rejected."
