"""Voice notes heard: each audio attachment (a Telegram voice note, a Discord voice message, a Slack audio
clip) is transcribed before the turn, and its transcript becomes the message's text, marked as a voice
note's. Never silence: with no transcriber configured, or one that fails after its retry, the person is
told so in one sentence, the voice note stays where the adapter stored it, and the model is told a voice
note arrived that could not be heard. `echo` (the profile's `voice_notes.echo`) sends the person what was
heard before the answer.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace

from hermes_engine.attachments.blobs import local_path
from hermes_engine.ports.inbound import Attachment, InboundMessage
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.transcription import Transcriber, TranscriptionFailed

log = logging.getLogger(__name__)

TRANSCRIPT = "[voice note, transcribed]"
NO_TRANSCRIBER = ("I can't listen to voice notes here because no transcriber is set up (the bot's admin can "
                  "set HERMES_STT_MODEL), so please type your message; your voice note is kept.")
FAILED = ("I couldn't transcribe your voice note ({reason}), so please type it or try again shortly; "
          "the voice note is kept.")
MAX_ECHO_CHARS = 3_000


def is_voice(attachment: Attachment) -> bool:
    """An audio file that was downloaded: a voice note, or audio by its type."""
    if attachment.path is None or attachment.refused_reason:
        return False
    return attachment.kind == "voice" or attachment.mime_type.lower().startswith("audio/")


@dataclass(frozen=True)
class Heard:
    """The message with its voice notes' words as text, and what the person is to be told first."""

    message: InboundMessage
    notices: tuple[str, ...] = ()


class VoiceNotes:
    def __init__(self, transcriber: Transcriber | None, *, echo: bool = False) -> None:
        self.transcriber = transcriber
        self.echo = echo

    async def hear(self, msg: InboundMessage) -> Heard:
        voices = [a for a in msg.attachments if is_voice(a)]
        if not voices or msg.synthetic:
            return Heard(msg)
        texts: list[str] = [msg.text] if msg.text else []
        notices: list[str] = []
        for voice in voices:
            if self.transcriber is None:
                texts.append(f"[a voice note ({voice.file_name}) arrived but could not be heard: no transcriber "
                             "is set up; the person was told]")
                notices.append(NO_TRANSCRIBER)
                continue
            try:
                path = await asyncio.to_thread(local_path, voice)  # another replica may have downloaded it
                words = await self.transcriber.transcribe(str(path or voice.path or ""), voice.file_name,
                                                          voice.mime_type)
            except TranscriptionFailed as exc:
                log.warning("could not transcribe a voice note (%s): %s", voice.file_name, exc)
                texts.append(f"[a voice note ({voice.file_name}) arrived but could not be heard: {exc}; "
                             "the person was told]")
                notices.append(FAILED.format(reason=exc))
                continue
            if not words:
                texts.append(f"[a voice note ({voice.file_name}) arrived; no words were heard in it]")
                continue
            texts.append(f"{TRANSCRIPT} {words}")
            if self.echo:
                shown = words if len(words) <= MAX_ECHO_CHARS else words[:MAX_ECHO_CHARS] + "…"
                notices.append(f"🎙️ I heard: “{shown}”")
        text = "\n\n".join(texts)
        return Heard(replace(msg, text=text, command=msg.command, args=msg.args), tuple(notices))


VOICE_NOTES: ServiceKey[VoiceNotes] = ServiceKey("voice_notes")
UNHEARD = VoiceNotes(None)  # where no feature serves one: voice notes are still answered, never dropped
