"""StreamingReply and the adapter's delivery (`adapters.delivery.Outbound`), against an in-test fake
platform transport that records every call (with its virtual time) and refuses on cue. The outbound
scheduler runs on a `FakeClock`: time passes only when the test lets it, so order and intervals are
asserted exactly and the tests take no wall time."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from clock_kit import FakeClock

from adapters.base import Capabilities, PlatformAdapter
from adapters.outbound import OutboundScheduler
from adapters.parts import InMemoryDeliveryLedger
from adapters.render import Rendered
from adapters.splitting import find_fences
from adapters.transport import NativeStream
from hermes_engine.errors import PlatformError
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import Delivery, DeliveryLedger, Outlet

INTERVAL = 1.0
DELTA = 1 / 64  # between two deltas of a streamed answer: a binary fraction, so virtual times add up exactly
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


class FakePlatform:
    """A `Transport`: records calls; keeps what the chat shows; raises queued errors per op name."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[Call] = []
        self.shown: dict[str, tuple[str, bool]] = {}  # message id -> (text, rendered), in post order
        self.failures: dict[str, list[BaseException]] = {}
        self.markup_fails_on: str | None = None  # rendered text containing this is refused
        self.ids = itertools.count(1)

    def record(self, op: str, target: ReplyTarget, message_id: str | None = None, text: str = "",
               rendered: bool = False) -> None:
        self.calls.append(Call(self.clock(), op, target.chat_id, message_id, text, rendered))
        if self.failures.get(op):
            raise self.failures[op].pop(0)
        if rendered and self.markup_fails_on is not None and self.markup_fails_on in text:
            raise MarkupError("can't parse entities")

    async def send(self, target: ReplyTarget, text: str, *, rendered: bool, extras: Mapping[str, Any]) -> str:
        self.record("send", target, None, text, rendered)
        message_id = f"m{next(self.ids)}"
        self.shown[message_id] = (text, rendered)
        return message_id

    async def edit(self, target: ReplyTarget, message_id: str, text: str, *, rendered: bool,
                   extras: Mapping[str, Any]) -> None:
        self.record("edit", target, message_id, text, rendered)
        if message_id not in self.shown:
            raise PlatformError("message to edit not found")
        self.shown[message_id] = (text, rendered)

    async def delete(self, target: ReplyTarget, message_id: str) -> None:
        self.record("delete", target, message_id)
        self.shown.pop(message_id, None)

    async def typing(self, target: ReplyTarget) -> None:
        self.record("typing", target)

    def native_stream(self, target: ReplyTarget) -> NativeStream | None:
        return None


class NativeFakePlatform(FakePlatform):
    """A fake with platform-native streaming (Slack-like)."""

    def native_stream(self, target: ReplyTarget) -> NativeStream | None:
        return self

    async def start(self, target: ReplyTarget, markdown: str) -> str:
        self.record("native_start", target, None, markdown)
        message_id = f"m{next(self.ids)}"
        self.shown[message_id] = (markdown, True)
        return message_id

    async def append(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        self.record("native_append", target, stream_id, markdown)
        self.shown[stream_id] = (self.shown[stream_id][0] + markdown, True)

    async def stop(self, target: ReplyTarget, stream_id: str, markdown: str) -> None:
        self.record("native_stop", target, stream_id, markdown)
        self.shown[stream_id] = (self.shown[stream_id][0] + markdown, True)


class FakeAdapter(PlatformAdapter):
    """An adapter on the fake platform, its scheduler on the test's clock."""

    platform = "fake"
    capabilities = CAPS

    def __init__(self, clock: FakeClock, caps: Capabilities | None = None, *, transport: FakePlatform | None = None,
                 ledger: DeliveryLedger | None = None, cursor: str = "") -> None:
        if caps is not None:
            self.capabilities = caps  # type: ignore[misc]
        self.stream_cursor = cursor  # type: ignore[misc]
        self.clock = clock
        self.fake = transport if transport is not None else FakePlatform(clock)
        super().__init__(self.fake, ledger=ledger,
                         scheduler=OutboundScheduler(self.capabilities.edit_interval_seconds, clock=clock,
                                                     sleep=clock.sleep))

    async def start(self) -> None:
        pass

    def render(self, markdown: str) -> Rendered:
        # "Rendering" keeps the text and marks it, so tests can tell finals from interim frames.
        return Rendered(markdown.replace("**", ""), {"entities": ("bold",)} if "**" in markdown else {})

    def is_markup_error(self, exc: BaseException) -> bool:
        return isinstance(exc, MarkupError)

    # -- helpers for assertions --
    @property
    def calls(self) -> list[Call]:
        return self.fake.calls

    @property
    def shown(self) -> dict[str, tuple[str, bool]]:
        return self.fake.shown

    def fail(self, op: str, *errors: BaseException) -> None:
        self.fake.failures.setdefault(op, []).extend(errors)

    def texts(self) -> list[str]:
        return [text for text, _ in self.shown.values()]

    def ops(self, *names: str) -> list[Call]:
        return [c for c in self.calls if c.op in names]

    def times(self, chat: str = "c1") -> list[float]:
        return [c.at for c in self.calls if c.chat == chat and c.op != "typing"]

    def gaps(self, chat: str = "c1") -> list[float]:
        times = self.times(chat)
        return [b - a for a, b in zip(times, times[1:], strict=False)]


def native_adapter_on(clock: FakeClock) -> FakeAdapter:
    return FakeAdapter(clock, dataclasses.replace(CAPS, native_streaming=True, threads=True, max_message_length=500),
                       transport=NativeFakePlatform(clock))


TARGET = ReplyTarget("fake", "acct", "c1")
OTHER = ReplyTarget("fake", "acct", "c2")
THREAD = ReplyTarget("fake", "acct", "c1", thread_id="t1")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def adapter(clock: FakeClock):
    a = FakeAdapter(clock)
    yield a
    await clock.run(a.stop())


@pytest.fixture
async def native_adapter(clock: FakeClock):
    a = native_adapter_on(clock)
    yield a
    await clock.run(a.stop())


async def stream_text(clock: FakeClock, stream, text: str, *, chunk: int = 5, delay: float = 0.0) -> None:
    for i in range(0, len(text), chunk):
        await stream.push(text[i:i + chunk])
        await clock.advance(delay)


def sentences(n: int) -> str:
    return " ".join(f"Sentence {i} of the answer." for i in range(n))


# --- the Outlet ------------------------------------------------------------------------------------

def test_the_adapter_is_an_engine_outlet(adapter: FakeAdapter) -> None:
    outlet: Outlet = adapter  # checked by mypy: the adapter has every member of the engine's Outlet
    assert callable(outlet.open_stream) and callable(outlet.send) and callable(outlet.typing)


# --- streaming ------------------------------------------------------------------------------------

async def test_first_delta_posts_a_message_and_later_deltas_edit_it_as_plain_text(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Hello")
    await clock.settle()
    assert [(c.at, c.op, c.text, c.rendered) for c in adapter.calls] == [(0.0, "send", "Hello", False)]
    await stream.push(" **world**")
    await clock.advance(INTERVAL)
    assert [(c.at, c.op, c.text, c.rendered) for c in adapter.calls][1] == (INTERVAL, "edit", "Hello **world**", False)
    await clock.run(stream.finish("Hello **world**"))
    assert adapter.shown == {"m1": ("Hello world", True)}
    assert (adapter.calls[-1].at, adapter.calls[-1].op, adapter.calls[-1].rendered) == (2 * INTERVAL, "edit", True)


async def test_interim_frames_are_paced_and_merged_when_behind_but_the_final_arrives(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    text = sentences(5)  # < 200 chars, one message
    await stream_text(clock, stream, text, chunk=1, delay=DELTA)  # 134 deltas in about two seconds
    await clock.run(stream.finish(text))
    assert adapter.gaps() == [INTERVAL] * (len(adapter.calls) - 1), "one call a paced interval, none sooner"
    assert [c.op for c in adapter.calls] == ["send", "edit", "edit", "edit"], "frames were merged, not queued"
    assert adapter.texts() == [text]
    assert adapter.calls[-1].rendered


async def test_unchanged_interim_frames_are_not_sent(adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Hello")
    await clock.advance(INTERVAL)
    await stream.push("   ")  # trailing whitespace does not change the frame
    await clock.advance(INTERVAL)
    assert [c.op for c in adapter.calls] == ["send"]
    await clock.run(stream.finish("Hello"))  # the final equals the interim text and has no formatting
    assert [c.op for c in adapter.calls] == ["send", "edit"]  # one edit: plain -> rendered
    assert adapter.shown == {"m1": ("Hello", True)}


async def test_streaming_past_the_limit_freezes_the_message_and_continues_in_a_new_one(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    text = sentences(25)  # ~700 chars at a 200-char limit
    await stream_text(clock, stream, text, chunk=20, delay=DELTA)
    await clock.until(lambda: " ".join(adapter.texts()) == text)
    interim = adapter.texts()
    assert len(interim) >= 3
    assert all(len(t) <= 200 for t in interim)
    assert all(t.endswith(".") for t in interim[:-1]), "frozen at a sentence boundary"
    assert " ".join(interim) == text
    assert set(adapter.gaps()) == {INTERVAL}
    await clock.run(stream.finish(text))
    assert " ".join(adapter.texts()) == text
    assert all(rendered for _, rendered in adapter.shown.values())
    assert all(len(c.text) <= 200 for c in adapter.ops("send", "edit"))


async def test_a_code_block_streamed_past_the_limit_is_closed_and_reopened(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    code = "```python\n" + "\n".join(f"value_{i} = {i}" for i in range(40)) + "\n```"
    await stream_text(clock, stream, code, chunk=25, delay=DELTA)
    await clock.until(lambda: len(adapter.shown) >= 3 and adapter.texts()[-1].endswith("value_39 = 39\n```"))
    for text in adapter.texts():
        assert all(f.closed for f in find_fences(text))
        assert text.startswith("```python\n")
    await clock.run(stream.finish(code))
    assert all(all(f.closed for f in find_fences(t)) for t in adapter.texts())


async def test_a_final_shorter_than_the_interim_deletes_the_surplus_messages(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream_text(clock, stream, sentences(25), chunk=40, delay=DELTA)
    await clock.until(lambda: len(adapter.shown) >= 3)
    shown = list(adapter.shown)
    await clock.run(stream.finish("Actually, the short answer is **42**."))
    assert adapter.texts() == ["Actually, the short answer is 42."]
    assert [c.message_id for c in adapter.ops("delete")] == shown[:0:-1], "the surplus goes, last first"


async def test_rewind_edits_the_shown_messages_into_the_new_answer_and_the_final_removes_the_rest(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream_text(clock, stream, sentences(14), chunk=40)  # a broken answer, two messages long
    await clock.until(lambda: " ".join(adapter.texts()) == sentences(14))
    first, second = adapter.shown

    await clock.run(stream.rewind())
    await stream.push("The complete answer")
    await clock.until(lambda: adapter.shown[first][0] == "The complete answer")
    await clock.run(stream.finish("The complete answer."))

    assert adapter.texts() == ["The complete answer."] and list(adapter.shown) == [first]  # edited in place
    assert [c.message_id for c in adapter.ops("delete")] == [second]
    assert len(adapter.ops("send")) == 2  # nothing posted after the rewind


async def test_a_final_longer_than_the_interim_posts_more_messages(adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Thinking")
    await clock.settle()
    final = sentences(20)
    await clock.run(stream.finish(final))
    assert len(adapter.shown) >= 3
    assert " ".join(adapter.texts()) == final
    assert adapter.ops("send")[0].text == "Thinking"
    assert adapter.gaps() == [INTERVAL] * (len(adapter.calls) - 1)


async def test_a_second_finish_with_the_same_key_is_a_no_op(adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Hi")
    await clock.run(stream.finish("Hi **there**"))
    calls = len(adapter.calls)
    await clock.run(stream.finish("Hi **there**"))
    await clock.run(stream.finish("something else"))
    assert len(adapter.calls) == calls
    assert adapter.texts() == ["Hi there"]


async def test_a_concurrent_double_finish_delivers_the_final_once(adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await clock.run(asyncio.gather(stream.finish("Once **only**"), stream.finish("Once **only**")))
    assert [c.op for c in adapter.calls] == ["send"]
    assert adapter.texts() == ["Once only"]


async def test_a_retried_turn_on_an_answered_key_shows_nothing_more(adapter: FakeAdapter, clock: FakeClock) -> None:
    first = adapter.open_stream(TARGET, idempotency_key="turn-7")
    await clock.run(first.finish("The answer."))
    retry = adapter.open_stream(TARGET, idempotency_key="turn-7")
    await retry.push("The ans")  # a retried turn streams again: no interim frame for an answered key ...
    await clock.advance(INTERVAL)
    assert adapter.texts() == ["The answer."]
    await clock.run(retry.finish("The answer."))  # ... and its final is the one already delivered
    assert adapter.texts() == ["The answer."]
    assert len(adapter.ops("send")) == 1 and not adapter.ops("delete")


async def test_concurrent_finishes_of_two_streams_with_one_key_deliver_once(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    a = adapter.open_stream(TARGET, idempotency_key="k")
    b = adapter.open_stream(TARGET, idempotency_key="k")
    await clock.run(asyncio.gather(a.finish("Final."), b.finish("Final.")))
    assert adapter.texts() == ["Final."]
    assert len(adapter.ops("send")) == 1


async def test_a_markup_error_resends_that_part_as_plain_markdown(adapter: FakeAdapter, clock: FakeClock) -> None:
    adapter.fake.markup_fails_on = "bad"
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await clock.run(stream.finish("**bad** markup"))
    sends = adapter.ops("send")
    assert [(c.at, c.text, c.rendered) for c in sends] == [(0.0, "bad markup", True),
                                                           (INTERVAL, "**bad** markup", False)], \
        "the plain resend is paced too"
    assert adapter.texts() == ["**bad** markup"]


async def test_a_markup_error_on_the_final_edit_falls_back_to_a_plain_edit(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    adapter.fake.markup_fails_on = "bad"
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("**bad**")
    await clock.settle()
    await clock.run(stream.finish("**bad** markup"))
    assert adapter.shown == {"m1": ("**bad** markup", False)}


async def test_only_the_failing_part_falls_back_to_plain_text(adapter: FakeAdapter, clock: FakeClock) -> None:
    adapter.fake.markup_fails_on = "bad"
    final = "**good** " + sentences(6) + "\n\n**bad** " + sentences(3)
    await clock.run(adapter.open_stream(TARGET, idempotency_key="k1").finish(final))
    shown = list(adapter.shown.values())
    assert len(shown) == 2
    assert shown[0][1] is True and shown[1] == ("**bad** " + sentences(3), False)


async def test_a_rate_limit_while_streaming_pauses_the_chat_and_the_final_still_arrives(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    pause = 2.5
    adapter.fail("edit", PlatformError("Too Many Requests", retry_after=pause))
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    other = adapter.open_stream(OTHER, idempotency_key="k2")
    await stream.push("One")
    await clock.settle()
    await stream.push(" two")
    await clock.advance(INTERVAL)  # the edit has been refused now
    refused = adapter.ops("edit")[0].at
    assert refused == INTERVAL
    await other.push("Elsewhere")
    await clock.settle()
    await stream.push(" three")
    await clock.run(asyncio.gather(stream.finish("One two three"), other.finish("Elsewhere")))
    assert adapter.times("c1") == [0.0, refused, refused + pause], "nothing to c1 until the pause ended"
    assert adapter.times("c2") == [refused, refused + INTERVAL], "c2 was not held up"
    assert adapter.shown["m1"] == ("One two three", True)


async def test_an_interim_failure_stops_interim_updates_but_not_the_final(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    adapter.fail("edit", PlatformError("bad request"))
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("One")
    await clock.settle()
    await stream.push(" two")
    await clock.advance(INTERVAL)
    await stream.push(" three")
    await clock.advance(INTERVAL)
    assert len(adapter.ops("edit")) == 1
    await clock.run(stream.finish("One two three"))
    assert adapter.texts() == ["One two three"]


async def test_a_message_that_cannot_be_edited_gets_the_final_posted_anew(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Draft")
    await clock.settle()
    del adapter.shown["m1"]  # someone deleted the message
    await clock.run(stream.finish("Final"))
    assert adapter.texts() == ["Final"]


async def test_without_edit_capability_only_the_final_is_posted(clock: FakeClock) -> None:
    adapter = FakeAdapter(clock, dataclasses.replace(CAPS, can_edit=False))
    try:
        stream = adapter.open_stream(TARGET, idempotency_key="k1")
        await stream_text(clock, stream, sentences(3), delay=DELTA)
        await clock.advance(5 * INTERVAL)
        assert adapter.calls == []
        await clock.run(stream.finish(sentences(10)))
        assert [c.op for c in adapter.calls] == ["send"] * len(adapter.calls)
        assert all(c.rendered for c in adapter.calls) and len(adapter.calls) >= 2
    finally:
        await clock.run(adapter.stop())


async def test_the_stream_cursor_shows_on_interim_frames_only(clock: FakeClock) -> None:
    adapter = FakeAdapter(clock, cursor=" ▌")
    try:
        stream = adapter.open_stream(TARGET, idempotency_key="k1")
        await stream.push("Hello")
        await clock.settle()
        assert adapter.texts() == ["Hello ▌"]
        await clock.run(stream.finish("Hello"))
        assert adapter.texts() == ["Hello"]
    finally:
        await clock.run(adapter.stop())


async def test_abort_keeps_what_was_shown_and_posts_the_note(clock: FakeClock) -> None:
    adapter = FakeAdapter(clock, cursor=" ▌")
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Partial answ")
    await clock.settle()
    await clock.run(stream.abort("⏹ Stopped."))
    await stream.push("more")
    await clock.run(stream.finish("Whole answer"))  # a finish after abort is ignored
    await clock.advance(INTERVAL)
    assert adapter.texts() == ["Partial answ", "⏹ Stopped."]
    await clock.run(adapter.stop())


async def test_abort_without_a_note_just_stops_editing(adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Partial")
    await clock.settle()
    await clock.run(stream.abort())
    await stream.push(" more")
    await clock.advance(INTERVAL)
    assert [c.op for c in adapter.calls] == ["send"]
    assert adapter.texts() == ["Partial"]


# --- native streaming ------------------------------------------------------------------------------

async def test_native_streaming_in_a_thread_appends_deltas_and_stops_with_the_rest(
        native_adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = native_adapter.open_stream(THREAD, idempotency_key="k1")
    text = sentences(8)
    await stream_text(clock, stream, text, chunk=3, delay=DELTA)
    await clock.run(stream.finish(text))
    ops = [c.op for c in native_adapter.calls]
    assert ops[0] == "native_start" and ops[-1] == "native_stop"
    assert set(ops) <= {"native_start", "native_append", "native_stop"}
    assert len(ops) < len(text) / 3 / 2, "deltas were batched at the paced rate"
    assert native_adapter.gaps() == [INTERVAL] * (len(ops) - 1)
    assert native_adapter.texts() == [text]


async def test_native_streaming_needs_a_thread_otherwise_posts_and_edits(
        native_adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = native_adapter.open_stream(TARGET, idempotency_key="k1")
    await stream.push("Hello")
    await clock.settle()
    await clock.run(stream.finish("Hello"))
    assert [c.op for c in native_adapter.calls] == ["send", "edit"]


async def test_a_native_final_that_differs_from_the_stream_is_edited_in(
        native_adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = native_adapter.open_stream(THREAD, idempotency_key="k1")
    await stream.push("Draft text")
    await clock.settle()
    await clock.run(stream.finish("Completely **different**"))
    assert [c.op for c in native_adapter.calls] == ["native_start", "native_stop", "edit"]
    assert native_adapter.texts() == ["Completely different"]


async def test_rewinding_a_native_stream_closes_it_and_edits_its_message_into_the_new_answer(
        native_adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = native_adapter.open_stream(THREAD, idempotency_key="k1")
    await stream.push("A broken dra")
    await clock.until(lambda: native_adapter.texts() == ["A broken dra"])

    await clock.run(stream.rewind())
    await stream.push("The whole answer")
    await clock.until(lambda: native_adapter.texts() == ["The whole answer"])
    await clock.run(stream.finish("The whole **answer**"))

    assert [c.op for c in native_adapter.calls] == ["native_start", "native_stop", "edit", "edit"]
    assert native_adapter.texts() == ["The whole answer"] and native_adapter.calls[-1].rendered


async def test_a_failing_native_stream_falls_back_to_post_then_edit(
        native_adapter: FakeAdapter, clock: FakeClock) -> None:
    native_adapter.fail("native_start", PlatformError("method not allowed"))
    stream = native_adapter.open_stream(THREAD, idempotency_key="k1")
    await stream.push("Hello")
    await clock.advance(INTERVAL)
    await clock.run(stream.finish("Hello there"))
    assert [c.op for c in native_adapter.calls] == ["native_start", "send", "edit"]
    assert native_adapter.texts() == ["Hello there"]


# --- send and typing -------------------------------------------------------------------------------

async def test_send_renders_splits_and_posts_every_part_paced(adapter: FakeAdapter, clock: FakeClock) -> None:
    text = sentences(20)
    await clock.run(adapter.send(TARGET, text))
    assert len(adapter.shown) >= 3
    assert all(c.rendered and len(c.text) <= 200 for c in adapter.calls)
    assert " ".join(adapter.texts()) == text
    assert adapter.times() == [i * INTERVAL for i in range(len(adapter.calls))]


async def test_send_with_an_idempotency_key_posts_once(adapter: FakeAdapter, clock: FakeClock) -> None:
    await clock.run(asyncio.gather(*(adapter.send(TARGET, "Goal progress: 3/5", idempotency_key="goal-1-3")
                                     for _ in range(3))))
    await clock.run(adapter.send(TARGET, "Goal progress: 3/5", idempotency_key="goal-1-3"))
    assert adapter.texts() == ["Goal progress: 3/5"]


async def test_a_failed_send_can_be_retried_with_the_same_key(adapter: FakeAdapter, clock: FakeClock) -> None:
    adapter.fail("send", PlatformError("chat not found"))
    with pytest.raises(PlatformError):
        await clock.run(adapter.send(TARGET, "Hello", idempotency_key="k"))
    await clock.run(adapter.send(TARGET, "Hello", idempotency_key="k"))
    assert adapter.texts() == ["Hello"]


async def test_a_rate_limited_send_waits_retry_after_and_is_shown(adapter: FakeAdapter, clock: FakeClock) -> None:
    adapter.fail("send", PlatformError("Too Many Requests", retry_after=3.0))
    await clock.run(adapter.send(TARGET, "You now have access."))
    assert [(c.at, c.op) for c in adapter.calls] == [(0.0, "send"), (3.0, "send")]
    assert adapter.texts() == ["You now have access."]


async def test_typing_is_sent_when_idle_and_skipped_while_a_reply_is_queued(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    await adapter.typing(TARGET)
    await clock.settle()
    assert [c.op for c in adapter.calls] == ["typing"]
    sending = asyncio.ensure_future(adapter.send(TARGET, sentences(10)))
    await clock.settle()
    await adapter.typing(TARGET)
    await clock.run(sending)
    assert [c.op for c in adapter.calls].count("typing") == 1


async def test_typing_is_not_sent_without_the_capability(clock: FakeClock) -> None:
    adapter = FakeAdapter(clock, dataclasses.replace(CAPS, typing_indicator=False))
    await adapter.typing(TARGET)
    await clock.settle()
    assert adapter.calls == []
    await clock.run(adapter.stop())


async def test_stopping_the_adapter_drains_a_queued_final(clock: FakeClock) -> None:
    adapter = FakeAdapter(clock)
    sending = asyncio.ensure_future(adapter.send(TARGET, sentences(12)))
    await clock.settle()
    await clock.run(adapter.stop())
    await sending
    assert " ".join(adapter.texts()) == sentences(12)


# --- after a restart: the durable ledger -------------------------------------------------------------

def restarted(crashed: FakeAdapter, transport: FakePlatform | None = None) -> FakeAdapter:
    """A new process's adapter on the same chat and the same (durable) ledger; whatever the old one
    still had queued is abandoned, as a killed process's would be."""
    fresh = FakeAdapter(crashed.clock, transport=transport or FakePlatform(crashed.clock), ledger=crashed.ledger)
    fresh.fake.shown = crashed.shown
    fresh.fake.ids = crashed.fake.ids
    return fresh


async def test_a_final_after_a_restart_edits_the_message_the_crashed_reply_posted(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    first_life = adapter.open_stream(TARGET, idempotency_key="e1:reply")
    await first_life.push("The ans")
    await clock.until(lambda: adapter.ops("send"))
    second = restarted(adapter)
    await clock.run(second.open_stream(TARGET, idempotency_key="e1:reply").finish("The **answer**."))
    assert list(second.shown.values()) == [("The answer.", True)]
    assert not second.ops("send") and [c.message_id for c in second.ops("edit")] == ["m1"]
    await clock.run(second.stop())


async def test_a_reply_restarted_mid_stream_continues_in_the_message_already_shown(
        adapter: FakeAdapter, clock: FakeClock) -> None:
    await adapter.open_stream(TARGET, idempotency_key="e1:reply").push("A first try that was cut")
    await clock.until(lambda: adapter.ops("send"))
    second = restarted(adapter)
    again = second.open_stream(TARGET, idempotency_key="e1:reply")
    await again.push("The second try")
    await clock.until(lambda: second.ops("edit"))
    await clock.run(again.finish("The second try, complete."))
    assert list(second.shown.values()) == [("The second try, complete.", True)]
    assert not second.ops("send")
    await clock.run(second.stop())


class CountedReads(InMemoryDeliveryLedger):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    async def get(self, key: str) -> Delivery | None:
        self.reads += 1
        return await super().get(key)


async def test_a_streamed_answer_reads_the_ledger_once_and_still_finishes_what_a_crash_left(
        clock: FakeClock) -> None:
    ledger = CountedReads()
    adapter = FakeAdapter(clock, ledger=ledger)
    stream = adapter.open_stream(TARGET, idempotency_key="e1:reply")
    await stream.push("The ans")
    await clock.until(lambda: adapter.ops("send"))
    await clock.run(stream.finish("The **answer**."))
    assert ledger.reads == 1  # when the stream opened: the final delivery knew what it had posted
    assert await ledger.get("e1:reply") == Delivery(("m1",), final=True)
    cut = adapter.open_stream(TARGET, idempotency_key="e2:reply")
    await cut.push("Half of it")
    await clock.until(lambda: len(adapter.ops("send")) == 2)
    second = restarted(adapter)  # a new life knows nothing: it reads what the first one recorded
    await clock.run(second.open_stream(TARGET, idempotency_key="e2:reply").finish("All of it."))
    assert not second.ops("send") and [c.message_id for c in second.ops("edit")] == ["m2"]
    await clock.run(second.stop())
    await clock.run(adapter.stop())


class DiesOnTheSecondPost(FakePlatform):
    async def send(self, target: ReplyTarget, text: str, *, rendered: bool, extras: Mapping[str, Any]) -> str:
        if [c for c in self.calls if c.op == "send"]:
            raise PlatformError("the process died while the second part went out")
        return await super().send(target, text, rendered=rendered, extras=extras)


async def test_parts_posted_before_a_crash_are_edited_not_posted_again(clock: FakeClock) -> None:
    text = sentences(20)
    crashed = FakeAdapter(clock, transport=DiesOnTheSecondPost(clock))
    parts = crashed.render_parts(text)
    assert len(parts) >= 3
    with pytest.raises(PlatformError):
        await clock.run(crashed.send(TARGET, text, idempotency_key="e1:goal"))
    assert len(crashed.shown) == 1
    second = restarted(crashed)
    await clock.run(second.send(TARGET, text, idempotency_key="e1:goal"))
    assert [t for t, _ in second.shown.values()] == [p.rendered.text for p in parts if p.rendered]
    assert len(second.ops("send")) == len(parts) - 1 and len(second.ops("edit")) == 1
    await clock.run(second.stop())
    await clock.run(crashed.stop())


async def test_a_stop_note_does_not_close_the_answer_for_a_restart(adapter: FakeAdapter, clock: FakeClock) -> None:
    stream = adapter.open_stream(TARGET, idempotency_key="e1:reply")
    await stream.push("Half an")
    await clock.until(lambda: adapter.ops("send"))
    await clock.run(stream.abort("Stopped."))
    second = restarted(adapter)
    await clock.run(second.open_stream(TARGET, idempotency_key="e1:reply").finish("The answer."))
    assert [t for t, _ in second.shown.values()] == ["The answer.", "Stopped."]
    await clock.run(second.stop())
