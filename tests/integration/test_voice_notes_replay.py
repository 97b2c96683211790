"""A voice note is heard once: a turn stopped after its user message was stored is answered after the
restart from the stored transcript, without asking the transcriber again or telling the person twice."""

from __future__ import annotations

import asyncio

from engine_harness import make_profile
from fakes.fake_llm import Reply

from hermes_engine.attachments.voice import TRANSCRIPT
from hermes_engine.ports.inbound import Attachment


async def test_a_voice_note_is_not_transcribed_again_when_its_turn_is_replayed(engine, fake_llm, tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_STT_MODEL", "whisper-1")
    monkeypatch.setenv("HERMES_SHUTDOWN_GRACE_SECONDS", "0")
    fake_llm.transcripts.append("book a table for two")
    fake_llm.responder = lambda request: Reply(text="never finished", delay=30)
    profile = make_profile(voice_notes={"echo": True})
    first = await engine(profile=profile)
    note = tmp_path / "note.ogg"
    note.write_bytes(b"OggS voice")
    await first.gateway.handle(first.message("", attachments=(
        Attachment("voice", "note.ogg", "audio/ogg", 10, str(note)),)))
    for _ in range(200):  # the user message is written behind while the model call hangs
        session = next(iter(first.gateway.sessions.values()), None)
        if session and fake_llm.requests and await first.store.load_messages(session.record.id):
            break
        await asyncio.sleep(0.05)
    assert first.outlet.texts == ["🎙️ I heard: “book a table for two”"]
    await first.stop()

    fake_llm.responder = lambda request: Reply(text="Booked.")
    fake_llm.requests.clear()
    second = await engine(profile=profile)
    await second.outlet.wait_for(1)
    await second.idle()
    assert second.outlet.texts == ["Booked."]  # the echo is not said again
    assert len(fake_llm.transcriptions) == 1
    assert fake_llm.requests[0].last_user_text.startswith(f"{TRANSCRIPT} book a table for two")
