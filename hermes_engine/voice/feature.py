"""Voice replies: `/voice on|off` per conversation, and each answer, once delivered as text, also spoken.

The text always goes first and whole (nothing is only audible); the recording follows through the adapter's
`FileOutlet`, the same pacer and delivery ledger as every file, under one idempotency key per answer (the
session and the message answered), so a retry never sends a second bubble. Telegram shows it as a voice
bubble (`OutgoingFile.voice`), Slack and Discord as an audio file in the thread or channel.

The answer is spoken up to the profile's `tts.max_chars` (`spoken.py`: the first part, cut at a sentence end).
A speech endpoint that fails leaves the text as it was: the failure is logged and the person told once per
conversation, in one sentence.
"""

from __future__ import annotations

import logging
from typing import Protocol

from hermes_engine.config.speech import TtsProfile
from hermes_engine.errors import HermesError
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.feature import Feature, TurnOutcome
from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import FileOutlet, OutgoingFile
from hermes_engine.ports.session import SessionScope
from hermes_engine.ports.speech import SpeechError, SpeechSynthesizer
from hermes_engine.voice.spoken import spoken_text
from hermes_engine.voice.state import VoiceState, VoiceSwitches

__all__ = ["FAILED", "NOT_SET_UP", "VoiceFeature"]

log = logging.getLogger(__name__)

NOT_SET_UP = ("Voice replies are not set up for this bot: the operator sets HERMES_TTS_MODEL (a speech endpoint, "
              "OpenAI's by default) and sets tts: {enabled: true} in the bot's profile.")
FAILED = "I couldn't make a voice reply (the speech service failed), so my answers here are text for now."
USAGE = "Use /voice on or /voice off."


class Outlets(Protocol):
    """The adapters that send files, by platform (`workspace.sending.FileOutlets`)."""

    def get(self, platform: str) -> FileOutlet | None: ...


def voice_key(session_id: int, message_id: str) -> str:
    return f"voice:{session_id}:{message_id}"


class VoiceFeature(Feature):
    name = "voice"

    def __init__(self, synthesizer: SpeechSynthesizer | None, tts: TtsProfile, outlets: Outlets) -> None:
        self.synthesizer, self.tts, self.outlets = synthesizer, tts, outlets
        self._host: Host | None = None
        self._switches: VoiceSwitches | None = None

    @property
    def available(self) -> bool:
        return self.synthesizer is not None and self.tts.enabled

    def register_commands(self, registry: CommandRegistry) -> None:
        registry.command("voice", "answers here also as voice: /voice on, /voice off")(self.voice)

    async def start(self, host: Host) -> None:
        self._host = host
        self._switches = VoiceSwitches(host.store, default_on=self.tts.default_on)

    async def voice(self, ctx: CommandContext) -> str:
        choice = ctx.args.strip().lower()
        switches = self._switches
        assert switches is not None, "started"
        conversation = ctx.session.key
        if choice not in ("on", "off", ""):
            return USAGE
        if choice == "on" and not self.available:
            return NOT_SET_UP
        if not choice:
            state = await switches.get(conversation)
            on = state.on and self.available
            return f"Voice replies are {'on' if on else 'off'} here. {USAGE}"
        await switches.put(conversation, VoiceState(on=choice == "on"))
        if choice == "on":
            return "Voice replies are on here: each answer comes as text and as a voice message."
        return "Voice replies are off here: answers come as text only."

    async def status_lines(self, scope: SessionScope, person_id: int | None) -> list[str]:
        if not self.available or self._switches is None:
            return []
        state = await self._switches.get(scope.session_key)
        return [f"Voice replies: {'on' if state.on else 'off'} (/voice on|off)"]

    async def on_turn_end(self, outcome: TurnOutcome) -> None:
        if not self.available or outcome.purpose != "turn" or outcome.failed or outcome.interrupted:
            return
        if not outcome.final_text.strip() or not outcome.message_id or self._host is None:
            return
        session = self._host.session(outcome.scope.session_key)
        if session is None:
            return
        self._host.spawn(self._speak(outcome, session.target),
                         name=f"voice:{outcome.scope.session_id}:{outcome.message_id}")

    async def _speak(self, outcome: TurnOutcome, target: ReplyTarget) -> None:
        """Speak one delivered answer into its conversation (background work: never raises)."""
        switches, synthesizer = self._switches, self.synthesizer
        assert switches is not None and synthesizer is not None
        conversation = outcome.scope.session_key
        try:
            state = await switches.get(conversation)
            outlet = self.outlets.get(target.platform)
            text = spoken_text(outcome.final_text, self.tts.max_chars)
            if not state.on or outlet is None or not text:
                return
            try:
                speech = await synthesizer.synthesize(text)
            except SpeechError as exc:
                log.warning("voice reply in %s failed: %s", conversation, exc)
                await self._tell_failure(outcome, target, state)
                return
            if speech.data and len(speech.data) <= outlet.max_file_bytes(speech.media_type):
                file = OutgoingFile(name="answer.ogg", data=speech.data, media_type=speech.media_type, voice=True)
                await outlet.send_file(target, file,
                                       idempotency_key=voice_key(outcome.scope.session_id, outcome.message_id))
        except HermesError as exc:
            log.warning("voice reply in %s not sent: %s", conversation, exc)
        except Exception:
            log.exception("voice reply in %s failed", conversation)

    async def _tell_failure(self, outcome: TurnOutcome, target: ReplyTarget, state: VoiceState) -> None:
        """Once per conversation (until `/voice on` again), marked before it is said."""
        switches, host = self._switches, self._host
        assert switches is not None and host is not None
        if state.failure_told:
            return
        await switches.put(outcome.scope.session_key, VoiceState(on=state.on, failure_told=True))
        key = voice_key(outcome.scope.session_id, outcome.message_id)
        await host.notify(target, FAILED, idempotency_key=f"{key}:failed")
