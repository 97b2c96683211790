"""Attachments people send on Discord reach the agent: the real discord.py client reads them from the fake
Discord's gateway, the adapter streams them from the fake's CDN into the conversation's folder, and the
fake LLM is sent an image or a description by name, type and size."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from discord_kit import FAST, discord_environment
from engine_harness import Engine, fake_llm_environment, make_profile
from fakes.fake_discord import FakeDiscord
from fakes.fake_llm import FakeLLM, Reply
from files_kit import kept_files, png, sent_images

from adapters.discord import PLATFORM
from hermes_engine.config import AccessRules
from hermes_gateway.wiring import build_gateway
from storage.store import SqlStore


@pytest.fixture
async def fake_discord():
    async with FakeDiscord() as fake:
        yield fake


@pytest.fixture
async def discord_bot(fake_llm: FakeLLM, fake_discord: FakeDiscord, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """`await discord_bot(options=...)` → the started engine, as `hermes-gateway run` starts it."""
    discord_environment(monkeypatch, fake_discord)
    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    started = []

    async def make(options=None) -> Engine:
        alice = fake_discord.user("alice")
        profile = make_profile(access=AccessRules(allowed_users=[alice["id"]], pairing=False))
        e = Engine(tmp_path, profile, None)
        e.store = SqlStore(e.settings.db_url)
        await e.store.init()
        e.gateway = build_gateway(e.settings, e.profile, e.store)
        adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options({**FAST, **(options or {})}), None,
                                 os.environ)
        e.gateway.attach(adapter)
        await adapter.start()
        await e.gateway.start()
        started.append((e, adapter))
        return e

    yield make
    for e, adapter in started:
        await adapter.stop_receiving()
        await e.stop()
        await adapter.stop()


async def answered(fake: FakeDiscord, channel_id: str, text: str) -> None:
    await fake.wait_for(lambda: any(m.content == text for m in fake.bot_messages(channel_id)), 15, text)


async def test_a_screenshot_in_a_channel_reaches_the_model_as_an_image(discord_bot, fake_discord, fake_llm, tmp_path):
    e = await discord_bot()
    fake_llm.script(Reply(text="The build failed on step 3."))
    shot = fake_discord.attach("image.png", png(), "image/png")
    asked = await fake_discord.user_says(fake_discord.channel_id, "alice", "why did it fail?", mentions_bot=True,
                                         attachments=[shot])
    thread = await fake_discord.wait_for(lambda: fake_discord.thread_of(asked), what="a thread on the message")
    await answered(fake_discord, thread["id"], "The build failed on step 3.")
    await e.idle()

    request = fake_llm.requests[0]
    assert sent_images(request) == [f"data:image/png;base64,{base64.b64encode(png()).decode()}"]
    assert "[attachment: photo image.png (image/png, 1 KB)]" in request.last_user_text
    assert fake_discord.cdn_downloads == [(shot.id, len(png()))]
    [kept] = kept_files(tmp_path)
    assert kept.name == f"{asked.id}-image.png" and kept.read_bytes() == png()


async def test_a_text_file_and_a_voice_message_in_a_dm_are_described_by_name_type_and_size(
        discord_bot, fake_discord, fake_llm):
    e = await discord_bot()
    fake_llm.responder = lambda request: Reply(text=f"Got {len(fake_llm.requests)}.")
    dm = fake_discord.dm_channel("alice")["id"]
    log = fake_discord.attach("build.log", b"step 1 ok\nstep 2 ok\nstep 3 FAILED\n" * 100, "text/plain; charset=utf-8")
    await fake_discord.user_says(dm, "alice", "", attachments=[log])
    await answered(fake_discord, dm, "Got 1.")
    ogg = b"OggS\x00\x02" + b"\x00" * 20 + b"\x01\x13OpusHead" + b"\x00" * 2000
    voice = fake_discord.attach("voice-message.ogg", ogg, "audio/ogg", voice=True)
    await fake_discord.user_says(dm, "alice", "", attachments=[voice])
    await answered(fake_discord, dm, "Got 2.")
    await e.idle()

    first, second = fake_llm.requests[0].last_user_text, fake_llm.requests[1].last_user_text
    assert first.startswith("[attachment: document build.log (text/plain, 3 KB)]\n[untrusted data from the document")
    assert "step 3 FAILED" in first  # a text file's text is read (attachments/documents.py)
    # no transcriber in this test: the voice message is kept, named, and said to be unheard
    assert second.startswith("[a voice note (voice-message.ogg) arrived but could not be heard: no transcriber")
    assert "[attachment: voice voice-message.ogg (audio/ogg, " in second
    assert sent_images(fake_llm.requests[0]) == sent_images(fake_llm.requests[1]) == []


async def test_an_attachment_larger_than_it_declares_is_stopped_at_the_cap_and_the_person_told(
        discord_bot, fake_discord, fake_llm, tmp_path):
    e = await discord_bot(options={"max_file_mb": 0.25})
    fake_llm.script(Reply(text="Noted."))
    dm = fake_discord.dm_channel("alice")["id"]
    big = fake_discord.attach("core.dump", b"\x02" * (4 * 1024 * 1024), declared_size=1000)
    await fake_discord.user_says(dm, "alice", "the crash dump", attachments=[big])
    await answered(fake_discord, dm, "Noted.")
    await e.idle()

    told, answer = fake_discord.bot_messages(dm)
    assert told.content == "I did not read core.dump: it is larger than the 0.25 MB limit for files."
    assert "[attachment refused: core.dump" in fake_llm.requests[0].last_user_text
    [(_, sent)] = fake_discord.cdn_downloads
    assert sent < 4 * 1024 * 1024
    assert kept_files(tmp_path) == []


async def test_a_png_that_is_not_an_image_and_a_name_that_climbs_out_stay_harmless(
        discord_bot, fake_discord, fake_llm, tmp_path):
    e = await discord_bot()
    fake_llm.script(Reply(text="Looked."))
    dm = fake_discord.dm_channel("alice")["id"]
    not_png = fake_discord.attach("graph.png", b"<html>not an image</html>", "image/png")
    climbing = fake_discord.attach("../../.ssh/authorized_keys\u202e", b"ssh-ed25519 AAAA\n", "text/plain")
    await fake_discord.user_says(dm, "alice", "look", attachments=[not_png, climbing])
    await answered(fake_discord, dm, "Looked.")
    await e.idle()

    request = fake_llm.requests[0]
    assert sent_images(request) == []
    assert "[attachment: document graph.png (text/plain, 1 KB)]" in request.last_user_text
    assert "[attachment: document authorized_keys (text/plain, 1 KB)]" in request.last_user_text
    kept = kept_files(tmp_path)
    assert len(kept) == 2 and all(p.parent.parent == tmp_path / "attachments" for p in kept)
    assert not (tmp_path / ".ssh").exists()


async def test_a_voice_message_reaches_the_model_as_its_transcript_and_a_pdf_as_its_text(
        discord_bot, fake_discord, fake_llm, monkeypatch):
    from documents_kit import pdf_bytes

    from hermes_engine.attachments.voice import TRANSCRIPT

    monkeypatch.setenv("HERMES_STT_MODEL", "whisper-1")  # at the fake LLM, through OPENAI_BASE_URL
    fake_llm.transcripts.append("what does the report say")
    e = await discord_bot()
    fake_llm.script(Reply(text="It says costs fell."))
    dm = fake_discord.dm_channel("alice")["id"]
    ogg = b"OggS\x00\x02" + b"\x00" * 20 + b"\x01\x13OpusHead" + b"\x00" * 2000
    voice = fake_discord.attach("voice-message.ogg", ogg, "audio/ogg", voice=True)
    report = fake_discord.attach("report.pdf", pdf_bytes("Costs fell in the second half"), "application/pdf")
    await fake_discord.user_says(dm, "alice", "", attachments=[voice, report])
    await answered(fake_discord, dm, "It says costs fell.")
    await e.idle()

    [upload] = fake_llm.transcriptions
    assert upload.data == ogg and upload.content_type == "audio/ogg"
    said = fake_llm.requests[0].last_user_text
    assert said.startswith(f"{TRANSCRIPT} what does the report say")
    assert "[untrusted data from the document report.pdf" in said and "Costs fell in the second half" in said
