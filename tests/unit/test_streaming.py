"""StreamingReply and PlatformAdapter delivery, against an in-test fake adapter that records every call
(with timestamps) and refuses on cue. Real asyncio time with a 0.05 s pacing interval."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from adapters.base import Capabilities, PlatformAdapter
from adapters.render import Rendered
from adapters.splitting import find_fences
from hermes_engine.errors import PlatformError
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import Outlet

INTERVAL = 0.05
EPS = 0.002
CAPS = Capabilities(200, "chars", can_edit=True, edit_interval_seconds=INTERVAL, format="fake")


class MarkupError(Exception):
    """What the fake platform raises for formatting it cannot parse."""


@dataclass
class Call:
    at: float
    op: str  # send | edit | delete | typing | native_start | native_append | native_stop
    chat: str
    message_id: str | None = None
    text: str = ""
    rendered: bool = False


class FakeAdapter(PlatformAdapter):
    """Records calls; keeps what the chat shows; raises queued errors per op name."""

    platform = "fake"
    capabilities = CAPS

    def __init__(self, caps: Capabilities | None = None, **kwargs: Any) -> None:
        if caps is not None:
            self.capabilities = caps  # type: ignore[misc]
        super().__init__(**kwargs)
        self.calls: list[Call] = []
        self.shown: dict[str, tuple[str, bool]] = {}  # message id -> (text, rendered), in post order
        self.failures: dict[str, list[BaseException]] = {}
        self.markup_fails_on: str | None = None  # rendered text containing this is refused
        self._ids = itertools.count(1)

    def fail(self, op: str, *errors: BaseException) -> None:
        self.failures.setdefault(op, []).extend(errors)

    def _record(self, op: str, target: ReplyTarget, message_id: str | None = None, text: str = "",
                rendered: bool = False) -> None:
        self.calls.append(Call(time.monotonic(), op, target.chat_id, message_id, text, rendered))
        if self.failures.get(op):
            raise self.failures[op].pop(0)
        if rendered and self.markup_fails_on is not None and self.markup_fails_on in text:
            raise MarkupError("can't parse entities")

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        await super().stop()

    async def _send_raw(self, target: ReplyTarget, text: str, *, rendered: bool,
                        extras: Mapping[str, Any]) -> str:
        self._record("send", target, None, text, rendered)
        message_id = f"m{next(self._ids)}"
        self.shown[message_id] = (text, rendered)
        return message_id

    async def _edit_raw(self, target: ReplyTarget, message_id: str, text: str, *, rendered: bool,
                        extras: Mapping[str, Any]) -> None:
        self._record("edit", target, message_id, text, rendered)
        if message_id not in self.shown:
            raise PlatformError("message to edit not found")
        self.shown[message_id] = (text, rendered)

    async def _delete_raw(self, target: ReplyTarget, message_id: str) -> None:
        self._record("delete", target, message_id)
        self.shown.pop(message_id, None)

    async def _typing_raw(self, target: ReplyTarget) -> None:
        self._record("typing", target)

    def render(self, markdown: str) -> Rendered:
        # "Rendering" keeps the text and marks it, so tests can tell finals from interim frames.
        return Rendered(markdown.replace("**", ""), {"entities": ("bold",)} if "**" in markdown else {})

    def is_markup_error(self, exc: BaseException) -> bool:
        return isinstance(exc, MarkupError)

    # -- helpers for assertions --
    def texts(self) -> list[str]:
        return [text for text, _ in self.shown.values()]

    def ops(self, *names: str) -> list[Call]:
        return [c for c in self.calls if c.op in names]

    def gaps(self, chat: str = "c1") -> list[float]:
        times = [c.at for c in self.calls if c.chat == chat and c.op != "typing"]
        return [b - a for a, b in zip(times, times[1:], strict=False)]


class NativeFakeAdapter(FakeAdapter):
    """A fake with platform-native streaming (Slack-like)."""

    capabilities = dataclasses.replace(CAPS, native_streaming=True, threads=True, max_message_length=500)

    async def _native_stream_start(self, target: ReplyTarget, markdown: str) -> str:
        self._record("native_start", target, None, markdown)
        message_id = f"m{next(self._ids)}"
        self.shown[message_id] = (markdown, True)
        return message_id

    async def _native_stream_append(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        self._record("native_append", target, stream_id, markdown)
        self.shown[stream_id] = (self.shown[stream_id][0] + markdown, True)

    async def _native_stream_stop(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        self._record("native_stop", target, stream_id, markdown)
        self.shown[stream_id] = (self.shown[stream_id][0] + markdown, True)


TARGET = ReplyTarget("fake", "acct", "c1")
OTHER = ReplyTarget("fake", "acct", "c2")


@pytest.fixture
async def adapter():
    a = FakeAdapter()
    yield a
    await a.stop()


async def stream_text(stream, text: str, *, chunk: int = 5, delay: float = 0.0) -> None:
    for i in range(0, len(text), chunk):
        await stream.push(text[i:i + chunk])
        await asyncio.sleep(delay)


async def eventually(condition, timeout: float = 2.0) -> None:
    """Wait until `condition()` holds (the pump works at the paced rate)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


def sentences(n: int) -> str:
    return " ".join(f"Sentence {i} of the answer." for i in range(n))


# --- the Outlet ------------------------------------------------------------------------------------

def test_the_adapter_is_an_engine_outlet(adapter: FakeAdapter) -> None:
    assert isinstance(adapter, Outlet)


# --- streaming ------------------------------------------------------------------------------------

async def test_first_delta_posts_a_message_and_later_deltas_edit_it_as_plain_text(adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Hello")
    await asyncio.sleep(0.02)
    assert [(c.op, c.text, c.rendered) for c in adapter.calls] == [("send", "Hello", False)]
    await stream.push(" **world**")
    await asyncio.sleep(INTERVAL + 0.03)
    assert [(c.op, c.text, c.rendered) for c in adapter.calls][1] == ("edit", "Hello **world**", False)
    await stream.finish("Hello **world**")
    assert adapter.shown == {"m1": ("Hello world", True)}
    assert adapter.calls[-1].op == "edit" and adapter.calls[-1].rendered


async def test_interim_frames_are_paced_and_merged_when_behind_but_the_final_arrives(
        adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    text = sentences(5)  # < 200 chars, one message
    await stream_text(stream, text, chunk=1, delay=0.001)  # ~130 deltas in a fraction of a second
    await stream.finish(text)
    assert min(adapter.gaps()) >= INTERVAL - EPS
    assert len(adapter.ops("edit")) < len(text) / 4, "frames were merged, not queued"
    assert adapter.texts() == [text]
    assert adapter.calls[-1].rendered


async def test_unchanged_interim_frames_are_not_sent(adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Hello")
    await asyncio.sleep(INTERVAL + 0.02)
    await stream.push("   ")  # trailing whitespace does not change the frame
    await asyncio.sleep(INTERVAL + 0.02)
    assert [c.op for c in adapter.calls] == ["send"]
    await stream.finish("Hello")  # the final equals the interim text and has no formatting
    assert [c.op for c in adapter.calls] == ["send", "edit"]  # one edit: plain -> rendered
    assert adapter.shown == {"m1": ("Hello", True)}


async def test_streaming_past_the_limit_freezes_the_message_and_continues_in_a_new_one(
        adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    text = sentences(25)  # ~700 chars at a 200-char limit
    await stream_text(stream, text, chunk=20, delay=0.005)
    await eventually(lambda: " ".join(adapter.texts()) == text)
    interim = adapter.texts()
    assert len(interim) >= 3
    assert all(len(t) <= 200 for t in interim)
    assert all(t.endswith(".") for t in interim[:-1]), "frozen at a sentence boundary"
    assert " ".join(interim) == text
    await stream.finish(text)
    assert " ".join(adapter.texts()) == text
    assert all(rendered for _, rendered in adapter.shown.values())
    assert all(len(c.text) <= 200 for c in adapter.ops("send", "edit"))


async def test_a_code_block_streamed_past_the_limit_is_closed_and_reopened(adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    code = "```python\n" + "\n".join(f"value_{i} = {i}" for i in range(40)) + "\n```"
    await stream_text(stream, code, chunk=25, delay=0.005)
    await eventually(lambda: len(adapter.shown) >= 3 and adapter.texts()[-1].endswith("value_39 = 39\n```"))
    for text in adapter.texts():
        assert all(f.closed for f in find_fences(text))
        assert text.startswith("```python\n")
    await stream.finish(code)
    assert all(all(f.closed for f in find_fences(t)) for t in adapter.texts())


async def test_a_final_shorter_than_the_interim_deletes_the_surplus_messages(adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream_text(stream, sentences(25), chunk=40, delay=0.005)
    await eventually(lambda: len(adapter.shown) >= 3)
    await stream.finish("Actually, the short answer is **42**.")
    assert adapter.texts() == ["Actually, the short answer is 42."]
    assert len(adapter.ops("delete")) >= 2


async def test_rewind_edits_the_shown_messages_into_the_new_answer_and_the_final_removes_the_rest(
        adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream_text(stream, sentences(14), chunk=40)  # a broken answer, two messages long
    await eventually(lambda: " ".join(adapter.texts()) == sentences(14))
    first, second = adapter.shown

    await stream.rewind()
    await stream.push("The complete answer")
    await eventually(lambda: adapter.shown[first][0] == "The complete answer")
    await stream.finish("The complete answer.")

    assert adapter.texts() == ["The complete answer."] and list(adapter.shown) == [first]  # edited in place
    assert [c.message_id for c in adapter.ops("delete")] == [second]
    assert len(adapter.ops("send")) == 2  # nothing posted after the rewind


async def test_a_final_longer_than_the_interim_posts_more_messages(adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Thinking")
    await asyncio.sleep(0.02)
    final = sentences(20)
    await stream.finish(final)
    assert len(adapter.shown) >= 3
    assert " ".join(adapter.texts()) == final
    assert adapter.ops("send")[0].text == "Thinking"


async def test_a_second_finish_with_the_same_key_is_a_no_op(adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Hi")
    await stream.finish("Hi **there**")
    calls = len(adapter.calls)
    await stream.finish("Hi **there**")
    await stream.finish("something else")
    assert len(adapter.calls) == calls
    assert adapter.texts() == ["Hi there"]


async def test_a_concurrent_double_finish_delivers_the_final_once(adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await asyncio.gather(stream.finish("Once **only**"), stream.finish("Once **only**"))
    assert [c.op for c in adapter.calls] == ["send"]
    assert adapter.texts() == ["Once only"]


async def test_a_retried_turn_on_an_answered_key_shows_nothing_more(adapter: FakeAdapter) -> None:
    first = adapter.open_stream(TARGET, idempotency_key="turn-7")
    await first.finish("The answer.")
    retry = adapter.open_stream(TARGET, idempotency_key="turn-7")
    await retry.push("The ans")  # a retried turn streams again: no interim frame for an answered key ...
    await asyncio.sleep(INTERVAL + 0.03)
    assert adapter.texts() == ["The answer."]
    await retry.finish("The answer.")  # ... and its final is the one already delivered
    assert adapter.texts() == ["The answer."]
    assert len(adapter.ops("send")) == 1 and not adapter.ops("delete")


async def test_concurrent_finishes_of_two_streams_with_one_key_deliver_once(adapter: FakeAdapter) -> None:
    a = adapter.open_stream(TARGET, idempotency_key="k")
    b = adapter.open_stream(TARGET, idempotency_key="k")
    await asyncio.gather(a.finish("Final."), b.finish("Final."))
    assert adapter.texts() == ["Final."]
    assert len(adapter.ops("send")) == 1


async def test_a_markup_error_resends_that_part_as_plain_markdown(adapter: FakeAdapter) -> None:
    adapter.markup_fails_on = "bad"
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.finish("**bad** markup")
    sends = adapter.ops("send")
    assert [(c.text, c.rendered) for c in sends] == [("bad markup", True), ("**bad** markup", False)]
    assert adapter.texts() == ["**bad** markup"]
    assert min(adapter.gaps()) >= INTERVAL - EPS, "the plain resend is paced too"


async def test_a_markup_error_on_the_final_edit_falls_back_to_a_plain_edit(adapter: FakeAdapter) -> None:
    adapter.markup_fails_on = "bad"
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("**bad**")
    await asyncio.sleep(0.02)
    await stream.finish("**bad** markup")
    assert adapter.shown == {"m1": ("**bad** markup", False)}


async def test_only_the_failing_part_falls_back_to_plain_text(adapter: FakeAdapter) -> None:
    adapter.markup_fails_on = "bad"
    final = "**good** " + sentences(6) + "\n\n**bad** " + sentences(3)
    await adapter.open_stream(TARGET, idempotency_key="k1").finish(final)
    shown = list(adapter.shown.values())
    assert len(shown) == 2
    assert shown[0][1] is True and shown[1] == ("**bad** " + sentences(3), False)


async def test_a_rate_limit_while_streaming_pauses_the_chat_and_the_final_still_arrives(
        adapter: FakeAdapter) -> None:
    pause = 0.25
    adapter.fail("edit", PlatformError("Too Many Requests", retry_after=pause))
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    other = adapter.open_stream(OTHER, idempotency_key="k2")
    await stream.push("One")
    await asyncio.sleep(0.01)
    await stream.push(" two")
    await asyncio.sleep(INTERVAL + 0.02)  # the edit has been refused now
    refused = adapter.ops("edit")[0].at
    await other.push("Elsewhere")
    await asyncio.sleep(0.02)
    await stream.push(" three")
    await stream.finish("One two three")
    await other.finish("Elsewhere")
    c1 = [c.at for c in adapter.calls if c.chat == "c1"]
    assert not [t for t in c1 if refused < t < refused + pause - EPS], "no call to c1 during the pause"
    assert [c.at for c in adapter.calls if c.chat == "c2"][0] < refused + pause, "c2 was not held up"
    assert adapter.shown["m1"] == ("One two three", True)


async def test_an_interim_failure_stops_interim_updates_but_not_the_final(adapter: FakeAdapter) -> None:
    adapter.fail("edit", PlatformError("bad request"))
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("One")
    await asyncio.sleep(0.01)
    await stream.push(" two")
    await asyncio.sleep(INTERVAL + 0.03)
    await stream.push(" three")
    await asyncio.sleep(INTERVAL + 0.03)
    assert len(adapter.ops("edit")) == 1
    await stream.finish("One two three")
    assert adapter.texts() == ["One two three"]


async def test_a_message_that_cannot_be_edited_gets_the_final_posted_anew(adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Draft")
    await asyncio.sleep(0.02)
    del adapter.shown["m1"]  # someone deleted the message
    await stream.finish("Final")
    assert adapter.texts() == ["Final"]


async def test_without_edit_capability_only_the_final_is_posted() -> None:
    adapter = FakeAdapter(dataclasses.replace(CAPS, can_edit=False))
    try:
        stream = adapter.open_stream(TARGET, idempotency_key="k1")
        await stream_text(stream, sentences(3), delay=0.005)
        await asyncio.sleep(0.1)
        assert adapter.calls == []
        await stream.finish(sentences(10))
        assert [c.op for c in adapter.calls] == ["send"] * len(adapter.calls)
        assert all(c.rendered for c in adapter.calls) and len(adapter.calls) >= 2
    finally:
        await adapter.stop()


async def test_the_stream_cursor_shows_on_interim_frames_only() -> None:
    adapter = FakeAdapter()
    adapter.stream_cursor = " ▌"  # type: ignore[misc]
    try:
        stream = adapter.open_stream(TARGET, idempotency_key="k1")
        await stream.push("Hello")
        await asyncio.sleep(0.02)
        assert adapter.texts() == ["Hello ▌"]
        await stream.finish("Hello")
        assert adapter.texts() == ["Hello"]
    finally:
        await adapter.stop()


async def test_abort_keeps_what_was_shown_and_posts_the_note(adapter: FakeAdapter) -> None:
    adapter.stream_cursor = " ▌"  # type: ignore[misc]
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Partial answ")
    await asyncio.sleep(0.02)
    await stream.abort("⏹ Stopped.")
    await stream.push("more")
    await stream.finish("Whole answer")  # a finish after abort is ignored
    await asyncio.sleep(INTERVAL + 0.02)
    assert adapter.texts() == ["Partial answ", "⏹ Stopped."]


async def test_abort_without_a_note_just_stops_editing(adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Partial")
    await asyncio.sleep(0.02)
    await stream.abort()
    await stream.push(" more")
    await asyncio.sleep(INTERVAL + 0.02)
    assert [c.op for c in adapter.calls] == ["send"]
    assert adapter.texts() == ["Partial"]


# --- native streaming ------------------------------------------------------------------------------

async def test_native_streaming_in_a_thread_appends_deltas_and_stops_with_the_rest() -> None:
    adapter = NativeFakeAdapter()
    thread = ReplyTarget("fake", "acct", "c1", thread_id="t1")
    try:
        stream = adapter.open_stream(thread, idempotency_key="k1")
        text = sentences(8)
        await stream_text(stream, text, chunk=3, delay=0.002)
        await stream.finish(text)
        ops = [c.op for c in adapter.calls]
        assert ops[0] == "native_start" and ops[-1] == "native_stop"
        assert set(ops) <= {"native_start", "native_append", "native_stop"}
        assert len(ops) < len(text) / 3 / 2, "deltas were batched at the paced rate"
        assert min(adapter.gaps()) >= INTERVAL - EPS
        assert adapter.texts() == [text]
    finally:
        await adapter.stop()


async def test_native_streaming_needs_a_thread_otherwise_posts_and_edits() -> None:
    adapter = NativeFakeAdapter()
    try:
        stream = adapter.open_stream(TARGET, idempotency_key="k1")
        await stream.push("Hello")
        await asyncio.sleep(0.02)
        await stream.finish("Hello")
        assert [c.op for c in adapter.calls] == ["send", "edit"]
    finally:
        await adapter.stop()


async def test_a_native_final_that_differs_from_the_stream_is_edited_in() -> None:
    adapter = NativeFakeAdapter()
    thread = ReplyTarget("fake", "acct", "c1", thread_id="t1")
    try:
        stream = adapter.open_stream(thread, idempotency_key="k1")
        await stream.push("Draft text")
        await asyncio.sleep(0.02)
        await stream.finish("Completely **different**")
        assert [c.op for c in adapter.calls] == ["native_start", "native_stop", "edit"]
        assert adapter.texts() == ["Completely different"]
    finally:
        await adapter.stop()


@pytest.fixture
async def native_adapter():
    a = NativeFakeAdapter()
    yield a
    await a.stop()


async def test_rewinding_a_native_stream_closes_it_and_edits_its_message_into_the_new_answer(
        native_adapter: NativeFakeAdapter) -> None:
    stream = native_adapter.open_stream(ReplyTarget("fake", "acct", "c1", thread_id="t1"), idempotency_key="k1")
    await stream.push("A broken dra")
    await eventually(lambda: native_adapter.texts() == ["A broken dra"])

    await stream.rewind()
    await stream.push("The whole answer")
    await eventually(lambda: native_adapter.texts() == ["The whole answer"])
    await stream.finish("The whole **answer**")

    assert [c.op for c in native_adapter.calls] == ["native_start", "native_stop", "edit", "edit"]
    assert native_adapter.texts() == ["The whole answer"] and native_adapter.calls[-1].rendered


async def test_a_failing_native_stream_falls_back_to_post_then_edit() -> None:
    adapter = NativeFakeAdapter()
    adapter.fail("native_start", PlatformError("method not allowed"))
    thread = ReplyTarget("fake", "acct", "c1", thread_id="t1")
    try:
        stream = adapter.open_stream(thread, idempotency_key="k1")
        await stream.push("Hello")
        await asyncio.sleep(INTERVAL + 0.03)
        await stream.finish("Hello there")
        assert [c.op for c in adapter.calls] == ["native_start", "send", "edit"]
        assert adapter.texts() == ["Hello there"]
    finally:
        await adapter.stop()


# --- send and typing -------------------------------------------------------------------------------

async def test_send_renders_splits_and_posts_every_part_paced(adapter: FakeAdapter) -> None:
    text = sentences(20)
    await adapter.send(TARGET, text)
    assert len(adapter.shown) >= 3
    assert all(c.rendered and len(c.text) <= 200 for c in adapter.calls)
    assert " ".join(adapter.texts()) == text
    assert min(adapter.gaps()) >= INTERVAL - EPS


async def test_send_with_an_idempotency_key_posts_once(adapter: FakeAdapter) -> None:
    await asyncio.gather(*(adapter.send(TARGET, "Goal progress: 3/5", idempotency_key="goal-1-3")
                           for _ in range(3)))
    await adapter.send(TARGET, "Goal progress: 3/5", idempotency_key="goal-1-3")
    assert adapter.texts() == ["Goal progress: 3/5"]


async def test_a_failed_send_can_be_retried_with_the_same_key(adapter: FakeAdapter) -> None:
    adapter.fail("send", PlatformError("chat not found"))
    with pytest.raises(PlatformError):
        await adapter.send(TARGET, "Hello", idempotency_key="k")
    await adapter.send(TARGET, "Hello", idempotency_key="k")
    assert adapter.texts() == ["Hello"]


async def test_typing_is_sent_when_idle_and_skipped_while_a_reply_is_queued(adapter: FakeAdapter) -> None:
    await adapter.typing(TARGET)
    await asyncio.sleep(0.01)
    assert [c.op for c in adapter.calls] == ["typing"]
    sending = asyncio.create_task(adapter.send(TARGET, sentences(10)))
    await asyncio.sleep(0.01)
    await adapter.typing(TARGET)
    await sending
    assert [c.op for c in adapter.calls].count("typing") == 1


async def test_typing_is_not_sent_without_the_capability() -> None:
    adapter = FakeAdapter(dataclasses.replace(CAPS, typing_indicator=False))
    await adapter.typing(TARGET)
    await asyncio.sleep(0.01)
    assert adapter.calls == []
    await adapter.stop()


async def test_stopping_the_adapter_drains_a_queued_final() -> None:
    adapter = FakeAdapter()
    sending = asyncio.create_task(adapter.send(TARGET, sentences(12)))
    await asyncio.sleep(0.01)
    await adapter.stop()
    await sending
    assert " ".join(adapter.texts()) == sentences(12)


# --- after a restart: the durable ledger -------------------------------------------------------------

def restarted(crashed: FakeAdapter) -> FakeAdapter:
    """A new process's adapter on the same chat and the same (durable) ledger; whatever the old one
    still had queued is abandoned, as a killed process's would be."""
    fresh = FakeAdapter(ledger=crashed.ledger)
    fresh.shown = crashed.shown
    fresh._ids = crashed._ids
    return fresh


async def test_a_final_after_a_restart_edits_the_message_the_crashed_reply_posted(adapter: FakeAdapter) -> None:
    first_life = adapter.open_stream(TARGET, idempotency_key="e1:reply")
    await first_life.push("The ans")
    await eventually(lambda: adapter.ops("send"))
    second = restarted(adapter)
    await second.open_stream(TARGET, idempotency_key="e1:reply").finish("The **answer**.")
    assert list(second.shown.values()) == [("The answer.", True)]
    assert not second.ops("send") and [c.message_id for c in second.ops("edit")] == ["m1"]
    await second.stop()


async def test_a_reply_restarted_mid_stream_continues_in_the_message_already_shown(adapter: FakeAdapter) -> None:
    await adapter.open_stream(TARGET, idempotency_key="e1:reply").push("A first try that was cut")
    await eventually(lambda: adapter.ops("send"))
    second = restarted(adapter)
    again = second.open_stream(TARGET, idempotency_key="e1:reply")
    await again.push("The second try")
    await eventually(lambda: second.ops("edit"))
    await again.finish("The second try, complete.")
    assert list(second.shown.values()) == [("The second try, complete.", True)]
    assert not second.ops("send")
    await second.stop()


class DiesOnTheSecondPost(FakeAdapter):
    async def _send_raw(self, target: ReplyTarget, text: str, *, rendered: bool,
                        extras: Mapping[str, Any]) -> str:
        if self.ops("send"):
            raise PlatformError("the process died while the second part went out")
        return await super()._send_raw(target, text, rendered=rendered, extras=extras)


async def test_parts_posted_before_a_crash_are_edited_not_posted_again() -> None:
    text = sentences(20)
    crashed = DiesOnTheSecondPost()
    parts = crashed.render_parts(text)
    assert len(parts) >= 3
    with pytest.raises(PlatformError):
        await crashed.send(TARGET, text, idempotency_key="e1:goal")
    assert len(crashed.shown) == 1
    second = restarted(crashed)
    await second.send(TARGET, text, idempotency_key="e1:goal")
    assert [t for t, _ in second.shown.values()] == [p.rendered.text for p in parts if p.rendered]
    assert len(second.ops("send")) == len(parts) - 1 and len(second.ops("edit")) == 1
    await second.stop()
    await crashed.stop()


async def test_a_stop_note_does_not_close_the_answer_for_a_restart(adapter: FakeAdapter) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="e1:reply")
    await stream.push("Half an")
    await eventually(lambda: adapter.ops("send"))
    await stream.abort("Stopped.")
    second = restarted(adapter)
    await second.open_stream(TARGET, idempotency_key="e1:reply").finish("The answer.")
    assert [t for t, _ in second.shown.values()] == ["The answer.", "Stopped."]
    await second.stop()
