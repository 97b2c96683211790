"""A model stream cut mid-answer, through the real gateway, the real SDKs and the fake LLM: the call is asked
again, then handed to the fallback, and the person sees one complete answer (or one clear error sentence),
never half an answer with a second one glued below it."""

from __future__ import annotations

import asyncio
import os

import pytest
from engine_harness import Engine, make_profile
from fakes.fake_llm import Reply
from fakes.fake_telegram import FakeTelegram, FakeUser

from adapters.render import render_telegram
from adapters.telegram import PLATFORM
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import BufferedStream, ReplyStream
from hermes_engine.providers.chain import STREAM_ATTEMPTS

ANSWER = "The capital of France is **Paris**, and it has been for a very long time."
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


class ChatOutlet:
    """The engine's view of a chat: every reply opened (live deltas since the last rewind, then the final)
    and every plain message sent."""

    platform = "test"

    def __init__(self) -> None:
        self.replies: list[BufferedStream] = []
        self.sent: list[str] = []

    def open_stream(self, target: ReplyTarget, *, idempotency_key: str) -> ReplyStream:
        self.replies.append(BufferedStream())
        return self.replies[-1]

    async def send(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> None:
        self.sent.append(text)

    async def typing(self, target: ReplyTarget) -> None:
        return None


async def ask(e: Engine, text: str) -> ChatOutlet:
    chat = ChatOutlet()
    assert e.gateway is not None
    e.gateway.attach(chat)
    await e.gateway.handle(e.message(text))
    await e.idle()
    return chat


def cut_after_two_chunks(text: str = ANSWER) -> Reply:
    return Reply(text=text, disconnect_after_chunks=2)


async def test_stream_cut_after_two_chunks_is_asked_again_and_the_chat_shows_one_complete_answer(
        engine, fake_llm) -> None:
    e = await engine()
    fake_llm.script(Reply(error=429, retry_after=0), Reply(error=500, retry_after=0), cut_after_two_chunks(),
                    Reply(text=ANSWER))

    chat = await ask(e, "What is the capital of France?")

    [reply] = chat.replies
    assert reply.final == ANSWER and "".join(reply.deltas) == ANSWER  # nothing of the cut answer left
    assert chat.sent == [] and reply.aborted is None
    assert len(fake_llm.requests) == 4  # 429 and 500 retried by the SDK, the cut stream by the router
    session = next(iter(e.gateway.sessions.values()))
    stored = await e.store.load_messages(session.record.id)
    assert [(m.role, m.content) for m in stored][1:] == [("assistant", ANSWER)]


async def test_primary_cut_every_time_hands_the_answer_to_the_fallback_and_only_its_answer_is_shown(
        engine, fake_llm, monkeypatch) -> None:
    monkeypatch.setenv("HERMES_FALLBACK_MODELS", "openai:backup-model")
    e = await engine(profile=make_profile(model="openai:primary-model"))
    backup_answer = "From the backup: Paris."
    fake_llm.responder = lambda request: (cut_after_two_chunks() if request.model == "primary-model"
                                          else Reply(text=backup_answer))

    chat = await ask(e, "What is the capital of France?")

    [reply] = chat.replies
    assert reply.final == backup_answer and "".join(reply.deltas) == backup_answer
    assert chat.sent == []
    assert [r.model for r in fake_llm.requests] == ["primary-model"] * STREAM_ATTEMPTS + ["backup-model"]


async def test_without_a_fallback_a_stream_cut_every_time_ends_in_one_clear_error_sentence(engine, fake_llm) -> None:
    e = await engine()
    fake_llm.responder = lambda request: cut_after_two_chunks()

    chat = await ask(e, "What is the capital of France?")

    [reply] = chat.replies
    assert reply.final is not None and reply.final.startswith("⚠️ The model is not reachable right now")
    assert chat.sent == []  # the final replaces the partial frame
    assert len(fake_llm.requests) == STREAM_ATTEMPTS


async def test_telegram_edits_the_partial_frame_into_the_complete_answer_in_one_message(
        engine, telegram: FakeTelegram, fake_llm) -> None:
    options = {"edit_interval_seconds": 0.05, "poll_timeout": 1}
    e = await engine(profile=make_profile(access={"allowed_users": ["42"]}, platforms={"telegram": options}))
    adapter = PLATFORM.build(e.gateway, e.settings, PLATFORM.parse_options(options), None, os.environ)
    e.gateway.attach(adapter)
    await adapter.start()
    try:
        await asyncio.wait_for(adapter.ready.wait(), 5)

        async def partial_frame_shown() -> None:
            await telegram.wait_for(lambda: telegram.chat(42).bot_messages, 5)

        fake_llm.script(Reply(text=ANSWER, disconnect_after_chunks=2, before_cut=partial_frame_shown),
                        Reply(text=ANSWER))
        telegram.user_says(42, FakeUser(42, "Alice", "alice"), "What is the capital of France?")
        final = render_telegram(ANSWER).text
        message = await telegram.wait_for_text(42, final)
        await e.idle()
        await telegram.settle(0.2)

        chat = telegram.chat(42)
        assert [m.message_id for m in chat.messages if m.from_bot] == [message.message_id]  # never a second one
        assert message.history[0][1] == "The capital"  # the partial frame, edited in place
        assert chat.bot_texts == [final]
    finally:
        await adapter.stop()
