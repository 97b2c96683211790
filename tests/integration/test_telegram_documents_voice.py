"""Documents and voice notes sent on Telegram, as the model and the person meet them: the real
python-telegram-bot against the fake Bot API, the real gateway against the fake LLM, which also serves
`/v1/audio/transcriptions` through the `openai` SDK's audio API."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from documents_kit import pdf_bytes
from engine_harness import Engine, make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeFile, FakeTelegram, FakeUser

from adapters.render import render_telegram
from adapters.telegram import PLATFORM, TelegramAdapter
from hermes_engine.attachments.voice import NO_TRANSCRIBER, TRANSCRIPT

FAST = {"edit_interval_seconds": 0.05, "group_interval_seconds": 0.05, "poll_timeout": 1, "poll_backoff": 0.2,
        "poll_backoff_max": 1.0, "send_backoff": 0.1, "send_backoff_max": 0.5}
ALICE = FakeUser(42, "Alice", "alice")
OGG = b"OggS\x00\x02" + b"\x01opus-frames" * 200
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
async def tg(engine, telegram):
    adapters: list[TelegramAdapter] = []

    async def make(**profile: Any) -> tuple[Engine, TelegramAdapter]:
        prof = make_profile(access={"allowed_users": ["42"]}, platforms={"telegram": FAST}, **profile)
        e = await engine(profile=prof)
        adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(FAST), None, os.environ)
        e.gateway.attach(adapter)
        await adapter.start()
        await asyncio.wait_for(adapter.ready.wait(), 5)
        adapters.append(adapter)
        return e, adapter

    yield make
    for adapter in reversed(adapters):
        await adapter.stop()


@pytest.fixture
def transcription(monkeypatch):
    """Transcription on, at the fake LLM (HERMES_STT_BASE_URL left unset: the SDK's OPENAI_BASE_URL)."""
    monkeypatch.setenv("HERMES_STT_MODEL", "whisper-1")


async def answered(fake: FakeTelegram, e: Engine, text: str) -> None:
    await fake.wait_for_text(42, render_telegram(text).text, 10)
    await e.idle(10)


def kept_files(home: Path, fake: FakeTelegram) -> list[Path]:
    return sorted((home / "attachments" / f"telegram_{fake.bot.id}_dm_42").iterdir())


async def test_a_voice_note_reaches_the_model_as_its_transcript(tg, telegram, fake_llm, transcription):
    fake_llm.transcripts.append("remind me to water the plants tomorrow")
    fake_llm.script(Reply(text="I will remind you."))
    e, _ = await tg()
    telegram.user_says(42, ALICE, voice=FakeFile("voice.ogg", OGG, "audio/ogg"))
    await answered(telegram, e, "I will remind you.")

    [upload] = fake_llm.transcriptions
    assert upload.model == "whisper-1" and upload.data == OGG and upload.content_type == "audio/ogg"
    said = fake_llm.requests[0].last_user_text
    assert said.startswith(f"{TRANSCRIPT} remind me to water the plants tomorrow")
    assert [m.text for m in telegram.chat(42).bot_messages] == ["I will remind you."]  # no echo by default


async def test_the_transcript_is_echoed_when_the_profile_asks(tg, telegram, fake_llm, transcription):
    fake_llm.transcripts.append("what is the weather")
    fake_llm.script(Reply(text="Sunny."))
    e, _ = await tg(voice_notes={"echo": True})
    telegram.user_says(42, ALICE, voice=FakeFile("voice.ogg", OGG, "audio/ogg"))
    await answered(telegram, e, "Sunny.")
    assert [m.text for m in telegram.chat(42).bot_messages] == ["🎙️ I heard: “what is the weather”", "Sunny."]


async def test_without_a_transcriber_the_person_is_told_and_the_voice_note_is_kept(tg, telegram, fake_llm, tmp_path):
    fake_llm.script(Reply(text="I could not hear that one."))
    e, _ = await tg()
    telegram.user_says(42, ALICE, voice=FakeFile("voice.ogg", OGG, "audio/ogg"))
    await answered(telegram, e, "I could not hear that one.")

    assert [m.text for m in telegram.chat(42).bot_messages] == [NO_TRANSCRIBER, "I could not hear that one."]
    said = fake_llm.requests[0].last_user_text
    assert "arrived but could not be heard: no transcriber is set up" in said
    assert "[attachment: voice " in said
    [kept] = kept_files(tmp_path, telegram)
    assert kept.read_bytes() == OGG and fake_llm.transcriptions == []


async def test_a_transcriber_answering_429_twice_is_retried_once_then_the_person_is_told(
        tg, telegram, fake_llm, transcription, tmp_path):
    fake_llm.transcription_failures.extend([429, 429])
    fake_llm.script(Reply(text="Please type it."))
    e, _ = await tg()
    telegram.user_says(42, ALICE, voice=FakeFile("voice.ogg", OGG, "audio/ogg"))
    await answered(telegram, e, "Please type it.")

    assert len(fake_llm.transcriptions) == 2  # the first try and one retry
    notice, answer = [m.text for m in telegram.chat(42).bot_messages]
    assert notice.startswith("I couldn't transcribe your voice note (the transcription service answered 429)")
    assert notice.endswith("the voice note is kept.") and answer == "Please type it."
    assert "could not be heard: the transcription service answered 429" in fake_llm.requests[0].last_user_text
    assert [p.read_bytes() for p in kept_files(tmp_path, telegram)] == [OGG]


async def test_a_transcriber_that_is_down_once_is_retried_and_heard(tg, telegram, fake_llm, transcription):
    fake_llm.transcription_failures.append(503)
    fake_llm.transcripts.append("hello again")
    fake_llm.script(Reply(text="Hello!"))
    e, _ = await tg()
    telegram.user_says(42, ALICE, voice=FakeFile("voice.ogg", OGG, "audio/ogg"))
    await answered(telegram, e, "Hello!")
    assert len(fake_llm.transcriptions) == 2
    assert fake_llm.requests[0].last_user_text.startswith(f"{TRANSCRIPT} hello again")
    assert [m.text for m in telegram.chat(42).bot_messages] == ["Hello!"]


async def test_a_pdf_reaches_the_model_as_its_text_marked_untrusted(tg, telegram, fake_llm):
    fake_llm.script(Reply(text="Revenue grew nine percent."))
    e, _ = await tg()
    data = pdf_bytes("Quarterly revenue grew by nine percent", "Costs fell in the second half")
    telegram.user_says(42, ALICE, "summarise this", document=FakeFile("q3.pdf", data, "application/pdf"))
    await answered(telegram, e, "Revenue grew nine percent.")

    said = fake_llm.requests[0].last_user_text
    assert said.startswith("summarise this\n\n[attachment: document q3.pdf (application/pdf")
    assert "[untrusted data from the document q3.pdf" in said
    assert "Quarterly revenue grew by nine percent" in said and "Costs fell in the second half" in said


async def test_a_corrupt_pdf_is_one_sentence_to_the_model_and_the_turn_is_answered(tg, telegram, fake_llm):
    fake_llm.script(Reply(text="That file seems damaged."))
    e, _ = await tg()
    telegram.user_says(42, ALICE, "read this", document=FakeFile("bad.pdf", b"%PDF-1.7\n garbage", "application/pdf"))
    await answered(telegram, e, "That file seems damaged.")
    said = fake_llm.requests[0].last_user_text
    [sentence] = [line for line in said.splitlines() if "could not be read" in line]
    assert sentence.startswith("[the document bad.pdf could not be read: the file is damaged or not a valid PDF")
    assert "[untrusted data" not in said


async def test_a_long_document_is_read_on_with_read_document_after_its_first_part(tg, telegram, fake_llm):
    lines = [f"line {n:05d} of the log, nothing to see here\n" for n in range(2000)]  # ~84,000 characters
    fake_llm.script(Reply(tool_calls=[("read_document", {"file_name": "server.log", "offset": 20_000})]),
                    Reply(text="Read on."))
    e, _ = await tg()
    telegram.user_says(42, ALICE, "check this", document=FakeFile("server.log", "".join(lines).encode(), "text/plain"))
    await answered(telegram, e, "Read on.")

    first = fake_llm.requests[0].last_user_text
    assert "line 00000 of the log" in first and "line 01000 of the log" not in first
    assert "call read_document with file_name='server.log' and offset=20000 for the rest]" in first
    [result] = fake_llm.requests[1].turn_tool_results
    assert result.startswith("[untrusted data from the document server.log")
    assert "line 00476 of the log" in result and "line 00000 of the log" not in result
    assert result.endswith("[characters 20,000–40,000; call read_document with offset=40000 for the rest]")
