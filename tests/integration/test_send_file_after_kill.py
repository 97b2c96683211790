"""`kill -9` a real gateway after Telegram took a file it sent and before the gateway learnt so: after the
restart the person has the file once.

The gateway runs as an operator runs it (`hermes-gateway run`, Telegram by long polling against the fake
Telegram, the model behind the fake LLM), with the `files` toolset. The fake applies the `sendDocument`
(the document is in the chat) and holds its answer; the process is killed then. After the restart the turn
goes on, the model sees its cut call as interrupted and asks to send the file again: the delivery ledger
holds that upload as begun, so it is not repeated.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest
import yaml
from engine_harness import fake_llm_environment
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram
from gateway_kit import gateway_process

from hermes_engine.agent.loop import INTERRUPTED_RESULT

pytestmark = pytest.mark.slow  # kills a real process: `pytest -m slow`

ROOT = Path(__file__).resolve().parents[2]
ALICE = 4242
START_TIMEOUT = 60  # the child imports everything first; a loaded CI machine is slow
CSV = "region,sales\nnorth,12\nsouth,7\n"


def bot_with_files(folder: Path) -> Path:
    """The shipped Telegram DM assistant with the `files` toolset, alice its admin."""
    bot = folder / "bot"
    shutil.copytree(ROOT / "bots" / "telegram-dm-assistant", bot)
    profile = yaml.safe_load((bot / "profile.yaml").read_text())
    profile["toolsets"] = ["core", "files"]
    profile["access"]["admins"] = [str(ALICE)]
    (bot / "profile.yaml").write_text(yaml.safe_dump(profile))
    return bot


def respond(request):
    results = request.turn_tool_results
    if not results:
        return Reply(tool_calls=[("write_file", {"path": "report.csv", "content": CSV})])
    if len(results) == 1 or INTERRUPTED_RESULT in results[-1]:
        return Reply(tool_calls=[("send_file", {"path": "report.csv", "caption": "The sales"})])
    return Reply(text=f"Done. [{results[-1]}]")


async def test_killed_after_the_upload_landed_the_restart_does_not_send_the_file_again(fake_llm, tmp_path):
    fake_llm.responder = respond
    home = tmp_path / "home"
    bot = bot_with_files(tmp_path)
    async with FakeTelegram() as telegram:
        env = {**fake_llm_environment(fake_llm), "HERMES_HOME": str(home), "HERMES_MODEL": "openai:gpt-test",
               "HERMES_FALLBACK_MODELS": "", "HERMES_HTTP_PORT": "0", "TELEGRAM_BOT_TOKEN": telegram.token,
               "TELEGRAM_API_BASE_URL": telegram.base_url, "TELEGRAM_ALLOWED_USERS": str(ALICE)}
        telegram.hold_answers("sendDocument")
        async with gateway_process(bot, env) as first_life:
            telegram.user_says(ALICE, ALICE, "send me the sales as a CSV")
            await telegram.wait_for(lambda: telegram.held, timeout=START_TIMEOUT)
            assert [m.file.name for m in telegram.chat(ALICE).bot_messages if m.file] == ["report.csv"]
            first_life.send_signal(signal.SIGKILL)
            await first_life.wait()
        telegram.release()

        async with gateway_process(bot, env):
            answer = await telegram.wait_for(
                lambda: next((m for m in telegram.chat(ALICE).bot_messages if m.text.startswith("Done.")), None),
                timeout=START_TIMEOUT)
            await telegram.settle(quiet=1.0, timeout=30)
        chat = telegram.chat(ALICE)
        assert [m.file.name for m in chat.bot_messages if m.file] == ["report.csv"]  # once
        assert len([c for c in telegram.requests if c.method == "sendDocument"]) == 1
        assert "report.csv was not sent again" in answer.text  # the model asked again, and was told
