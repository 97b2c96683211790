"""`kill -9` a real gateway in the middle of downloading a file a person sent on Slack or Discord: after the
restart the file is fetched and the person is answered once.

Neither platform sends the message again (Bolt acknowledged the Slack event at once; Discord does not
replay a gateway event to a new session), so the message must be in the durable inbox before its file is
fetched. The gateway runs as an operator runs it (`hermes-gateway run`, the model behind the fake LLM); the
fake platform holds the download open after its headers, and the process is killed then.
"""

from __future__ import annotations

import asyncio
import base64
import signal
from pathlib import Path

import pytest
from engine_harness import fake_llm_environment
from fakes.fake_discord import FakeDiscord
from fakes.fake_llm import Reply
from fakes.fake_slack import BOT_TOKEN, SIGNING_SECRET, FakeSlack
from files_kit import kept_files, png, sent_images
from gateway_kit import free_port, gateway_process, wait_ready

pytestmark = pytest.mark.slow  # kills a real process: `pytest -m slow`

START_TIMEOUT = 60  # the child imports everything first; a loaded CI machine is slow
ANSWER = "That is a login error."
PROFILE = """\
name: files-bot
model: openai:gpt-test
toolsets: [core]
platforms:
  {platform}
"""


def bot(folder: Path, platform: str) -> Path:
    path = folder / "bot"
    path.mkdir()
    (path / "profile.yaml").write_text(PROFILE.format(platform=platform))
    return path


def environment(fake_llm, home: Path, port: int) -> dict[str, str]:
    return {**fake_llm_environment(fake_llm), "HERMES_HOME": str(home), "HERMES_FALLBACK_MODELS": "",
            "HERMES_HTTP_PORT": str(port)}


def asked_once(fake_llm) -> str:
    """The one model request, which held the screenshot: the image, as the person sent it."""
    [request] = fake_llm.requests
    assert sent_images(request) == [f"data:image/png;base64,{base64.b64encode(png()).decode()}"]
    return request.last_user_text


async def test_a_slack_file_whose_download_a_kill_cut_is_fetched_after_the_restart_and_answered_once(
        fake_llm, tmp_path):
    fake_llm.script(Reply(text=ANSWER))
    home, port = tmp_path / "home", free_port()
    profile = bot(tmp_path, "slack:\n    events_path: /slack/events\n    native_streaming: false")
    async with FakeSlack() as slack:
        env = {**environment(fake_llm, home, port), "SLACK_BOT_TOKEN": BOT_TOKEN,
               "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": slack.api_url}
        slack.events_url = f"http://127.0.0.1:{port}/slack/events"
        slack.hold_downloads()
        async with gateway_process(profile, env) as first_life:
            await wait_ready(f"http://127.0.0.1:{port}/ready", first_life, START_TIMEOUT)
            shot = slack.upload("screenshot.png", png(), "image/png")
            await slack.say("UALICE", "DALICE", "what is wrong here?", files=[shot])  # acknowledged at once
            await slack.wait_for(lambda: slack.downloads_begun, START_TIMEOUT)
            first_life.send_signal(signal.SIGKILL)
            await first_life.wait()
        slack.release_downloads()
        assert fake_llm.requests == []

        async with gateway_process(profile, env) as second_life:
            await wait_ready(f"http://127.0.0.1:{port}/ready", second_life, START_TIMEOUT)
            await slack.wait_for(lambda: any(m.text == ANSWER for m in slack.bot_messages("DALICE")), START_TIMEOUT)
            await asyncio.sleep(1.0)  # anything said twice would come now
            answers = [m.text for m in slack.bot_messages("DALICE")]
        assert answers == [ANSWER]
        assert "[attachment: photo screenshot.png (image/png, 1 KB)]" in asked_once(fake_llm)
        assert slack.downloads_begun == [shot.id, shot.id]  # cut by the kill, then fetched whole
        assert slack.downloads[-1] == (shot.id, True, len(png()))
        [kept] = [p for p in kept_files(home) if not p.name.endswith(".part")]
        assert kept.name.endswith("-screenshot.png") and kept.read_bytes() == png()


async def test_a_discord_attachment_whose_download_a_kill_cut_is_fetched_after_the_restart_and_answered_once(
        fake_llm, tmp_path):
    fake_llm.script(Reply(text=ANSWER))
    home, port = tmp_path / "home", free_port()
    profile = bot(tmp_path, "discord:\n    ready_timeout: 5")
    async with FakeDiscord() as discord:
        env = {**environment(fake_llm, home, port), "DISCORD_BOT_TOKEN": discord.token,
               "DISCORD_API_BASE_URL": discord.url, "DISCORD_GATEWAY_URL": discord.gateway_url,
               "DISCORD_ALLOWED_GUILDS": discord.guild_id}
        discord.hold_downloads()
        async with gateway_process(profile, env) as first_life:
            await wait_ready(f"http://127.0.0.1:{port}/ready", first_life, START_TIMEOUT)
            await discord.wait_for(lambda: discord.connected, START_TIMEOUT, "the gateway connection")
            shot = discord.attach("screenshot.png", png(), "image/png")
            asked = await discord.user_says(discord.channel_id, "alice", "what is wrong here?", mentions_bot=True,
                                            attachments=[shot])
            await discord.wait_for(lambda: discord.cdn_begun, START_TIMEOUT, "the download")
            first_life.send_signal(signal.SIGKILL)
            await first_life.wait()
        discord.release_downloads()
        assert fake_llm.requests == []

        async with gateway_process(profile, env) as second_life:
            await wait_ready(f"http://127.0.0.1:{port}/ready", second_life, START_TIMEOUT)
            thread = await discord.wait_for(lambda: discord.thread_of(asked), START_TIMEOUT, "the thread")
            await discord.wait_for(lambda: any(m.content == ANSWER for m in discord.bot_messages(thread["id"])),
                                   START_TIMEOUT, "the answer")
            await asyncio.sleep(1.0)  # anything said twice would come now
            answers = [m.content for m in discord.bot_messages(thread["id"])]
        assert answers == [ANSWER]
        assert "[attachment: photo screenshot.png (image/png, 1 KB)]" in asked_once(fake_llm)
        assert discord.cdn_begun == [shot.id, shot.id]  # cut by the kill, then fetched whole
        assert discord.cdn_downloads[-1] == (shot.id, len(png()))
        [kept] = [p for p in kept_files(home) if not p.name.endswith(".part")]
        assert kept.name == f"{asked.id}-screenshot.png" and kept.read_bytes() == png()
