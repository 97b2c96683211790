"""Voice replies on Slack and Discord: with voice on (here the profile's `tts.default_on`), an answer is posted
as text and its recording follows as an OGG/Opus audio file in the same thread, through the real slack-sdk
(the two-step external upload) and discord.py (a message attachment) against the fakes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from discord_kit import FAST, discord_environment
from engine_harness import Engine, fake_llm_environment, make_profile
from fakes.fake_discord import FakeDiscord
from fakes.fake_llm import FakeLLM
from fakes.fake_slack import FakeSlack
from slack_kit import serve_slack, slack_environment

from adapters.discord import PLATFORM
from hermes_engine.config import AccessRules, Settings
from hermes_engine.workspace.sending import FileOutlets
from hermes_gateway.wiring import build_gateway, voice_feature
from storage.store import SqlStore

CHANNEL = "CGENERAL"
VOICE_ON = {"enabled": True, "default_on": True}


def speech_environment(monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLLM) -> None:
    monkeypatch.setenv("HERMES_TTS_MODEL", "tts-test")
    monkeypatch.setenv("HERMES_TTS_BASE_URL", fake_llm.openai_base_url)
    monkeypatch.setenv("HERMES_TTS_API_KEY", "speech-key")


@pytest.fixture
async def fake_slack():
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
async def fake_discord():
    async with FakeDiscord() as fake:
        yield fake


@pytest.fixture
async def slack_bot(engine, fake_slack, fake_llm, monkeypatch, tmp_path):
    slack_environment(monkeypatch, fake_slack)
    speech_environment(monkeypatch, fake_llm)
    profile = make_profile(toolsets=["core"], access={"admins": ["UALICE"]}, tts=VOICE_ON)
    outlets = FileOutlets()
    e = await engine(profile=profile, features=[voice_feature(Settings(home=tmp_path), profile, outlets)],
                     platform="slack")
    bot = await serve_slack(e, events_from=fake_slack, before_start=outlets.add)
    yield e
    await bot.close()


@pytest.fixture
async def discord_bot(fake_llm: FakeLLM, fake_discord: FakeDiscord, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    discord_environment(monkeypatch, fake_discord)
    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    speech_environment(monkeypatch, fake_llm)
    alice = fake_discord.user("alice")
    profile = make_profile(toolsets=["core"], tts=VOICE_ON,
                           access=AccessRules(allowed_users=[alice["id"]], admins=[alice["id"]], pairing=False))
    outlets = FileOutlets()
    feature = voice_feature(Settings(home=tmp_path), profile, outlets)
    e = Engine(tmp_path, profile, [feature])
    e.store = SqlStore(e.settings.db_url)
    await e.store.init()
    e.gateway = build_gateway(e.settings, e.profile, e.store, features=[feature])
    adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(FAST), None, os.environ)
    outlets.add(adapter)
    e.gateway.attach(adapter)
    await adapter.start()
    await e.gateway.start()
    yield e
    await adapter.stop_receiving()
    await e.stop()
    await adapter.stop()


async def test_slack_an_answer_is_followed_by_its_audio_file_in_the_same_thread(slack_bot, fake_slack, fake_llm):
    fake_llm.script("The build is green.")
    await fake_slack.say("UALICE", CHANNEL, f"<@{fake_slack.bot_user}> how is the build?")
    await fake_slack.wait_for(lambda: any(m.files for m in fake_slack.messages.get(CHANNEL, [])), 15)

    [answer] = [m for m in fake_slack.bot_messages(CHANNEL) if m.text == "The build is green."]
    [audio] = [m for m in fake_slack.messages.get(CHANNEL, []) if m.files]
    assert audio.from_bot and audio.thread_ts == answer.thread_ts and audio.thread_ts is not None
    [file] = audio.files
    assert file["name"] == "answer.ogg"
    assert fake_slack.uploads[file["id"]].data.startswith(b"OggS")
    [asked] = fake_llm.speech.requests
    assert asked.input == "The build is green." and asked.model == "tts-test"


async def test_discord_an_answer_is_followed_by_its_audio_attachment_in_the_thread(discord_bot, fake_discord,
                                                                                  fake_llm):
    fake_llm.script("The build is green.")
    asked = await fake_discord.user_says(fake_discord.channel_id, "alice", "how is the build?", mentions_bot=True)
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(asked), what="a thread on the message")
    channel = str(thread["id"])
    await fake_discord.wait_for(lambda: any(m.attachments for m in fake_discord.bot_messages(channel)), 15,
                                "the audio file")

    messages = fake_discord.bot_messages(channel)
    [text] = [m for m in messages if m.content == "The build is green."]
    [audio] = [m for m in messages if m.attachments]
    assert messages.index(text) < messages.index(audio)
    [attachment] = audio.attachments
    assert attachment["filename"] == "answer.ogg"
    assert fake_discord.files[attachment["id"]].data.startswith(b"OggS")
