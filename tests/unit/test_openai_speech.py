"""The speech provider against the fake LLM's `/v1/audio/speech` over real HTTP (the `openai` SDK): OGG/Opus
asked for and kept, another format transcoded with PyAV, failures as `SpeechError`."""

from __future__ import annotations

import pytest

from hermes_engine.config import BotProfile, Settings
from hermes_engine.config.speech import SpeechSettings
from hermes_engine.ports.speech import SpeechError
from hermes_engine.providers.openai_speech import OpenAISpeech, speech_from_settings


def speaker(fake_llm) -> OpenAISpeech:
    return OpenAISpeech("tts-test", "alloy", base_url=fake_llm.openai_base_url, api_key="k", max_retries=0)


async def test_opus_from_the_endpoint_is_kept_as_it_came(fake_llm) -> None:
    speech = await speaker(fake_llm).synthesize("Hello there.")
    assert speech.data.startswith(b"OggS") and speech.media_type == "audio/ogg"
    assert speech.duration_seconds > 0
    assert fake_llm.speech.requests[0].response_format == "opus"


@pytest.mark.parametrize("given", ["mp3", "wav"])
async def test_other_formats_are_transcoded_to_ogg_opus(fake_llm, given: str) -> None:
    fake_llm.speech.answer_format = given
    speech = await speaker(fake_llm).synthesize("Hello there, this is a longer sentence.")
    assert speech.data.startswith(b"OggS") and b"OpusHead" in speech.data[:200]
    assert 0.2 < speech.duration_seconds < 2


async def test_an_endpoint_error_is_a_speech_error(fake_llm) -> None:
    fake_llm.speech.failures.append(500)
    with pytest.raises(SpeechError, match="speech endpoint failed"):
        await speaker(fake_llm).synthesize("Hello.")


def test_speech_is_off_without_a_model_and_the_profile_keeps_tts_off_by_default(monkeypatch) -> None:
    assert speech_from_settings(SpeechSettings()) is None
    assert BotProfile(soul="s").tts.enabled is False
    monkeypatch.setenv("HERMES_TTS_MODEL", "gpt-4o-mini-tts")
    monkeypatch.setenv("HERMES_TTS_VOICE", "nova")
    settings = Settings()
    assert (settings.speech.model, settings.speech.voice) == ("gpt-4o-mini-tts", "nova")
    made = speech_from_settings(settings.speech)
    assert made is not None and made.voice == "nova"


def test_bytes_that_are_not_audio_are_a_speech_error() -> None:
    from hermes_engine.providers.opus import as_ogg_opus

    with pytest.raises(SpeechError, match="could not be read"):
        as_ogg_opus(b"<html>502 Bad Gateway</html>" * 10)
