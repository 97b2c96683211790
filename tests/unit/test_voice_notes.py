"""Voice notes heard by the real `openai` SDK's audio API against the fake LLM: what the message becomes,
and what the person is told when a note cannot be heard."""

from __future__ import annotations

from pathlib import Path

from fakes.fake_llm import FakeLLM

from hermes_engine.attachments.voice import NO_TRANSCRIBER, TRANSCRIPT, VoiceNotes, is_voice
from hermes_engine.ports.inbound import Attachment, ChatKind, InboundMessage
from hermes_engine.providers.openai_transcriber import OpenAITranscriber


def _message(*attachments: Attachment, text: str = "", synthetic: bool = False) -> InboundMessage:
    return InboundMessage("telegram", "bot", ChatKind.DM, "1", "2", text, "7", attachments=attachments,
                          synthetic=synthetic)


def _voice(tmp_path: Path, name: str, data: bytes = b"OggS voice", kind: str = "voice",
           mime: str = "audio/ogg") -> Attachment:
    path = tmp_path / name
    path.write_bytes(data)
    return Attachment(kind, name, mime, len(data), str(path))


def _transcriber(fake: FakeLLM) -> OpenAITranscriber:
    return OpenAITranscriber("whisper-1", base_url=fake.openai_base_url, api_key="test-key")


def test_voice_is_a_downloaded_voice_note_or_audio_by_type(tmp_path):
    assert is_voice(_voice(tmp_path, "a.ogg"))
    assert is_voice(_voice(tmp_path, "clip.m4a", kind="audio", mime="audio/mp4"))
    assert not is_voice(_voice(tmp_path, "notes.txt", kind="document", mime="text/plain"))
    assert not is_voice(Attachment("voice", "big.ogg", "audio/ogg", 10**9, None, "too big"))


async def test_the_caption_comes_first_then_each_voice_note_as_its_transcript(fake_llm, tmp_path):
    fake_llm.transcripts.extend(["first words", "second words"])
    voices = VoiceNotes(_transcriber(fake_llm))
    sent = (_voice(tmp_path, "a.ogg"), _voice(tmp_path, "b.ogg"))
    heard = await voices.hear(_message(*sent, text="two notes"))
    assert heard.message.text == f"two notes\n\n{TRANSCRIPT} first words\n\n{TRANSCRIPT} second words"
    assert heard.notices == () and [t.file_name for t in fake_llm.transcriptions] == ["a.ogg", "b.ogg"]
    assert heard.message.attachments == sent  # the files stay with the message


async def test_a_silent_voice_note_is_said_to_have_no_words(fake_llm, tmp_path):
    heard = await VoiceNotes(_transcriber(fake_llm)).hear(_message(_voice(tmp_path, "quiet.ogg")))
    assert heard.message.text == "[a voice note (quiet.ogg) arrived; no words were heard in it]"


async def test_without_a_transcriber_the_note_is_unheard_and_the_person_told(tmp_path):
    heard = await VoiceNotes(None).hear(_message(_voice(tmp_path, "a.ogg")))
    assert "could not be heard: no transcriber is set up" in heard.message.text
    assert heard.notices == (NO_TRANSCRIBER,)


async def test_a_voice_note_whose_file_is_gone_is_told_without_its_path(fake_llm, tmp_path):
    voice = Attachment("voice", "gone.ogg", "audio/ogg", 10, str(tmp_path / "gone.ogg"))  # deleted meanwhile
    heard = await VoiceNotes(_transcriber(fake_llm)).hear(_message(voice))
    [notice] = heard.notices
    assert "the voice note's file could not be read" in notice and str(tmp_path) not in notice


async def test_messages_without_voice_notes_and_the_engines_own_are_left_alone(fake_llm, tmp_path):
    voices = VoiceNotes(_transcriber(fake_llm))
    plain = _message(_voice(tmp_path, "doc.txt", kind="document", mime="text/plain"), text="hi")
    assert (await voices.hear(plain)).message is plain
    synthetic = _message(_voice(tmp_path, "a.ogg"), text="go on", synthetic=True)
    assert (await voices.hear(synthetic)).message is synthetic and fake_llm.transcriptions == []
