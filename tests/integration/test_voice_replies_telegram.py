"""Voice replies in Telegram: `/voice on`, and each answer arrives as its text and then as a voice bubble
(the real python-telegram-bot's multipart `sendVoice` to the fake Bot API, OGG/Opus from the fake LLM's
`/v1/audio/speech`); `/voice off` brings text only; no speech endpoint or a failing one, one sentence."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_harness import Engine, fake_llm_environment, make_profile
from fakes.fake_telegram import FakeTelegram, FakeUser
from outlets_kit import TelegramBot

from hermes_engine.config import Settings
from hermes_engine.voice.feature import FAILED, NOT_SET_UP
from hermes_engine.workspace.sending import FileOutlets
from hermes_gateway.wiring import voice_feature

ALICE = FakeUser(42, "Alice", "alice")
FAST = {"edit_interval_seconds": 0.05, "group_interval_seconds": 0.05, "poll_timeout": 1, "poll_backoff": 0.2,
        "poll_backoff_max": 1.0, "send_backoff": 0.1, "send_backoff_max": 0.5}
ANSWER = "The **meeting** is at three. Bring the [slides](https://example.com/s)."

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


class Bot(TelegramBot):
    """One gateway with voice replies as `wiring` builds them (`HERMES_TTS_*` read from the environment)
    and the real Telegram adapter."""

    def __init__(self, home: Path, tts: dict[str, object]) -> None:
        self.profile = make_profile(toolsets=["core"], access={"admins": ["42"]}, platforms={"telegram": FAST},
                                    tts=tts)
        self.outlets = FileOutlets()
        voice = voice_feature(Settings(home=home), self.profile, self.outlets)
        super().__init__(Engine(home, self.profile, [voice]), FAST, self.outlets)


def start_bot(fake_llm, tmp_path, monkeypatch, *, tts=None, speech=True):
    for name, value in fake_llm_environment(fake_llm).items():
        monkeypatch.setenv(name, value)
    if speech:
        monkeypatch.setenv("HERMES_TTS_MODEL", "tts-test")
        monkeypatch.setenv("HERMES_TTS_VOICE", "nova")
    return Bot(tmp_path, tts if tts is not None else {"enabled": True}).start()


@pytest.fixture
async def bot(telegram, fake_llm, tmp_path, monkeypatch):
    started = await start_bot(fake_llm, tmp_path, monkeypatch)
    yield started
    await started.stop()


def voices(telegram: FakeTelegram) -> list:
    return [m for m in telegram.chat(ALICE.id).bot_messages if m.file is not None and m.file.kind == "voice"]


async def turn_voice(telegram: FakeTelegram, choice: str) -> None:
    telegram.user_says(ALICE.id, ALICE, f"/voice {choice}")
    await telegram.wait_for(lambda: any(m.text.startswith(f"Voice replies are {choice}")
                                        for m in telegram.chat(ALICE.id).bot_messages), 10)


async def test_with_voice_on_an_answer_arrives_as_text_and_then_as_an_ogg_voice_bubble(bot, telegram, fake_llm):
    await turn_voice(telegram, "on")
    fake_llm.script(ANSWER)
    telegram.user_says(ALICE.id, ALICE, "when is the meeting?")
    [voice] = await telegram.wait_for(lambda: voices(telegram), 15)
    await telegram.settle(quiet=0.5)

    text = next(m for m in telegram.chat(ALICE.id).bot_messages if "meeting" in m.text and m.file is None)
    assert text.message_id < voice.message_id  # the text first, whole
    assert voice.file.data.startswith(b"OggS") and voice.file.name == "answer.ogg"
    [asked] = fake_llm.speech.requests
    assert (asked.model, asked.voice, asked.response_format) == ("tts-test", "nova", "opus")
    assert asked.input == "The meeting is at three. Bring the slides."  # Markdown and links not read out
    assert [c.method for c in telegram.chat(ALICE.id).calls].count("sendVoice") == 1


async def test_an_endpoint_giving_mp3_is_transcoded_to_ogg_opus(bot, telegram, fake_llm):
    fake_llm.speech.answer_format = "mp3"
    await turn_voice(telegram, "on")
    fake_llm.script("Sure.")
    telegram.user_says(ALICE.id, ALICE, "ok?")
    [voice] = await telegram.wait_for(lambda: voices(telegram), 15)
    assert voice.file.data.startswith(b"OggS")
    assert b"OpusHead" in voice.file.data[:200]


async def test_voice_off_brings_text_only(bot, telegram, fake_llm):
    await turn_voice(telegram, "on")
    await turn_voice(telegram, "off")
    fake_llm.script("Just text.")
    telegram.user_says(ALICE.id, ALICE, "hello")
    await telegram.wait_for_text(ALICE.id, "Just text.", 15)
    await telegram.settle(quiet=0.5)
    assert voices(telegram) == [] and fake_llm.speech.requests == []


async def test_voice_is_off_until_asked_for(bot, telegram, fake_llm):
    fake_llm.script("Plain.")
    telegram.user_says(ALICE.id, ALICE, "hello")
    await telegram.wait_for_text(ALICE.id, "Plain.", 15)
    await telegram.settle(quiet=0.5)
    assert voices(telegram) == [] and fake_llm.speech.requests == []


async def test_without_a_speech_endpoint_voice_on_says_how_to_set_it_up(telegram, fake_llm, tmp_path, monkeypatch):
    started = await start_bot(fake_llm, tmp_path, monkeypatch, speech=False)
    try:
        telegram.user_says(ALICE.id, ALICE, "/voice on")
        await telegram.wait_for_text(ALICE.id, NOT_SET_UP, 10)
        fake_llm.script("Text only.")
        telegram.user_says(ALICE.id, ALICE, "hello")
        await telegram.wait_for_text(ALICE.id, "Text only.", 15)
        await telegram.settle(quiet=0.5)
        assert voices(telegram) == []
    finally:
        await started.stop()


async def test_a_profile_without_tts_enabled_is_not_set_up_either(telegram, fake_llm, tmp_path, monkeypatch):
    started = await start_bot(fake_llm, tmp_path, monkeypatch, tts={})
    try:
        telegram.user_says(ALICE.id, ALICE, "/voice on")
        await telegram.wait_for_text(ALICE.id, NOT_SET_UP, 10)
        fake_llm.script("Text only.")
        telegram.user_says(ALICE.id, ALICE, "hello")
        await telegram.wait_for_text(ALICE.id, "Text only.", 15)
        await telegram.settle(quiet=0.5)
        assert voices(telegram) == [] and fake_llm.speech.requests == []  # voice stayed off
    finally:
        await started.stop()


async def test_a_failing_endpoint_leaves_the_text_and_says_so_once(bot, telegram, fake_llm):
    await turn_voice(telegram, "on")
    fake_llm.speech.failures.extend([500] * 4)  # the SDK retries once: two answers' worth
    for n in (1, 2):
        fake_llm.script(f"Answer {n}.")
        telegram.user_says(ALICE.id, ALICE, f"question {n}")
        await telegram.wait_for_text(ALICE.id, f"Answer {n}.", 15)
        await telegram.wait_for(lambda n=n: len(fake_llm.speech.requests) >= 2 * n, 15)
        await telegram.settle(quiet=0.5)
    said = [m.text for m in telegram.chat(ALICE.id).bot_messages]
    assert said.count(FAILED) == 1
    assert voices(telegram) == []


async def test_voice_on_survives_a_restart(telegram, fake_llm, tmp_path, monkeypatch):
    first = await start_bot(fake_llm, tmp_path, monkeypatch)
    await turn_voice(telegram, "on")
    await first.stop()
    second = await start_bot(fake_llm, tmp_path, monkeypatch)
    try:
        fake_llm.script("Still speaking.")
        telegram.user_says(ALICE.id, ALICE, "hello again")
        [voice] = await telegram.wait_for(lambda: voices(telegram), 15)
        assert voice.file.data.startswith(b"OggS")
    finally:
        await second.stop()


async def test_voice_alone_says_whether_it_is_on_and_a_wrong_word_says_how_to_use_it(bot, telegram, fake_llm):
    telegram.user_says(ALICE.id, ALICE, "/voice")
    await telegram.wait_for_text(ALICE.id, "Voice replies are off here. Use /voice on or /voice off.", 10)
    telegram.user_says(ALICE.id, ALICE, "/voice loud")
    await telegram.wait_for_text(ALICE.id, "Use /voice on or /voice off.", 10)
    await turn_voice(telegram, "on")
    telegram.user_says(ALICE.id, ALICE, "/voice")
    await telegram.wait_for_text(ALICE.id, "Voice replies are on here. Use /voice on or /voice off.", 10)
    telegram.user_says(ALICE.id, ALICE, "/status")
    status = await telegram.wait_for(
        lambda: next((m for m in telegram.chat(ALICE.id).bot_messages if "Voice replies: on" in m.text), None), 10)
    assert "Voice replies: off" not in status.text


async def test_a_long_answer_is_spoken_in_its_first_part_and_a_429_on_send_voice_is_waited_out_once(
        bot, telegram, fake_llm):
    await turn_voice(telegram, "on")
    telegram.rate_limit(ALICE.id, retry_after=1, methods=("sendVoice",))
    long_answer = "This is one sentence of a long answer. " * 60  # 2,340 characters
    fake_llm.script(long_answer)
    telegram.user_says(ALICE.id, ALICE, "tell me everything")
    await telegram.wait_for(lambda: voices(telegram), 20)
    await telegram.settle(quiet=0.5)

    [asked] = fake_llm.speech.requests
    assert len(asked.input) <= 1000 and asked.input.endswith("long answer.")  # the profile's default cap
    uploads = [c for c in telegram.chat(ALICE.id).calls if c.method == "sendVoice"]
    assert [c.status for c in uploads] == [429, 200] and uploads[1].time - uploads[0].time >= 0.9
    assert len(voices(telegram)) == 1
    text = "".join(m.text for m in telegram.chat(ALICE.id).bot_messages if m.file is None)
    assert long_answer.strip()[-40:] in text  # the whole answer went as text


async def test_voice_on_again_after_a_failure_tells_a_new_failure_again(bot, telegram, fake_llm):
    await turn_voice(telegram, "on")
    for n in (1, 2):
        fake_llm.speech.failures.extend([500, 500])
        fake_llm.script(f"Answer {n}.")
        telegram.user_says(ALICE.id, ALICE, f"question {n}")
        await telegram.wait_for(lambda n=n: [m.text for m in telegram.chat(ALICE.id).bot_messages].count(FAILED) == n,
                                15)
        telegram.user_says(ALICE.id, ALICE, "/voice on")
        await telegram.wait_for(lambda n=n: sum(m.text.startswith("Voice replies are on")
                                                for m in telegram.chat(ALICE.id).bot_messages) == n + 1, 10)
    await telegram.settle(quiet=0.5)
    assert [m.text for m in telegram.chat(ALICE.id).bot_messages].count(FAILED) == 2  # once per failure, not per try
