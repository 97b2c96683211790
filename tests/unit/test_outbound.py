"""OutboundScheduler: per-chat pacing, interim merging, 429 pauses, retries, draining. Real asyncio time
with small intervals."""

from __future__ import annotations

import asyncio
import time

import pytest

from adapters.outbound import DROPPED, OutboundScheduler
from hermes_engine.errors import PlatformError

INTERVAL = 0.05
EPS = 0.002  # the recorded time is taken a hair after the scheduler's own reading


class Recorder:
    """Makes ops that record (time, chat, label) when they run and can fail on cue."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, str, str]] = []

    def op(self, chat: str, label: str, *, fail: list[BaseException] | None = None):
        async def run() -> str:
            self.calls.append((time.monotonic(), chat, label))
            if fail:
                raise fail.pop(0)
            return label
        return run

    def times(self, chat: str) -> list[float]:
        return [t for t, c, _ in self.calls if c == chat]

    def labels(self, chat: str) -> list[str]:
        return [label for _, c, label in self.calls if c == chat]


@pytest.fixture
async def scheduler():
    s = OutboundScheduler(INTERVAL, backoff=0.01, max_backoff=0.05)
    yield s
    await s.stop(timeout=1)


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


async def test_calls_to_one_chat_are_spaced_by_at_least_the_interval(scheduler: OutboundScheduler) -> None:
    rec = Recorder()
    futures = [scheduler.enqueue("A", rec.op("A", f"send{i}")) for i in range(6)]
    assert await asyncio.gather(*futures) == [f"send{i}" for i in range(6)]
    assert min(gaps(rec.times("A"))) >= INTERVAL - EPS
    assert rec.labels("A") == [f"send{i}" for i in range(6)]  # in order


async def test_other_chats_are_not_held_up_by_a_busy_chat(scheduler: OutboundScheduler) -> None:
    rec = Recorder()
    busy = [scheduler.enqueue("A", rec.op("A", f"a{i}")) for i in range(10)]  # ~0.45 s of work
    await scheduler.submit("B", rec.op("B", "b0"))
    assert len(rec.times("A")) < 10  # B went out before A's queue was done: not queued behind it
    await asyncio.gather(*busy)


async def test_only_the_newest_pending_interim_edit_of_a_message_is_kept(scheduler: OutboundScheduler) -> None:
    rec = Recorder()
    await scheduler.submit("A", rec.op("A", "post"))  # the lane is now pacing
    frames = [scheduler.enqueue("A", rec.op("A", f"frame{i}"), interim=True, merge_key="m1") for i in range(20)]
    results = await asyncio.gather(*frames)
    assert results[:-1] == [DROPPED] * 19
    assert results[-1] == "frame19"
    assert rec.labels("A") == ["post", "frame19"]


async def test_interim_edits_of_different_messages_do_not_replace_each_other(scheduler: OutboundScheduler) -> None:
    rec = Recorder()
    await scheduler.submit("A", rec.op("A", "post"))
    f1 = scheduler.enqueue("A", rec.op("A", "m1"), interim=True, merge_key="m1")
    f2 = scheduler.enqueue("A", rec.op("A", "m2"), interim=True, merge_key="m2")
    assert await asyncio.gather(f1, f2) == ["m1", "m2"]


async def test_a_final_drops_pending_interim_edits_of_its_message_and_is_delivered(
        scheduler: OutboundScheduler) -> None:
    rec = Recorder()
    await scheduler.submit("A", rec.op("A", "post"))
    interim = scheduler.enqueue("A", rec.op("A", "interim"), interim=True, merge_key="m1")
    final = scheduler.enqueue("A", rec.op("A", "final"), merge_key="m1")
    assert await interim is DROPPED
    assert await final == "final"
    assert rec.labels("A") == ["post", "final"]


async def test_finals_and_sends_are_never_dropped_even_when_far_behind(scheduler: OutboundScheduler) -> None:
    rec = Recorder()
    futures = [scheduler.enqueue("A", rec.op("A", f"final{i}"), merge_key="m1") for i in range(8)]
    futures += [scheduler.enqueue("A", rec.op("A", "interim"), interim=True, merge_key="m1")]
    futures += [scheduler.enqueue("A", rec.op("A", "last"), merge_key="m1")]
    results = await asyncio.gather(*futures)
    assert results[:8] == [f"final{i}" for i in range(8)]
    assert results[8] is DROPPED and results[9] == "last"
    assert rec.labels("A") == [f"final{i}" for i in range(8)] + ["last"]


async def test_retry_after_pauses_only_that_chat_for_exactly_that_long_then_retries(
        scheduler: OutboundScheduler) -> None:
    rec = Recorder()
    pause = 0.3
    first = scheduler.enqueue("A", rec.op("A", "a0", fail=[PlatformError("429", retry_after=pause)]))
    second = scheduler.enqueue("A", rec.op("A", "a1"))
    others = [scheduler.enqueue("B", rec.op("B", f"b{i}")) for i in range(4)]
    assert await first == "a0"
    assert await second == "a1"
    await asyncio.gather(*others)

    a_times = rec.times("A")
    refused_at, retried_at, next_at = a_times
    assert retried_at - refused_at >= pause - EPS, "no call to the chat during the pause"
    assert retried_at - refused_at < pause + 0.1, "retried as soon as the pause ended"
    assert next_at - retried_at >= INTERVAL - EPS, "then paced as usual"
    assert rec.labels("A") == ["a0", "a0", "a1"]
    b_during_pause = [t for t in rec.times("B") if refused_at < t < refused_at + pause]
    assert len(b_during_pause) == 4, "the other chat kept going"


async def test_transient_errors_are_retried_with_backoff(scheduler: OutboundScheduler) -> None:
    rec = Recorder()
    result = await scheduler.submit("A", rec.op("A", "x", fail=[ConnectionError("reset"), TimeoutError()]))
    assert result == "x"
    assert rec.labels("A") == ["x", "x", "x"]
    assert min(gaps(rec.times("A"))) >= INTERVAL - EPS


async def test_transient_errors_give_up_after_the_retry_budget(scheduler: OutboundScheduler) -> None:
    rec = Recorder()
    with pytest.raises(ConnectionError):
        await scheduler.submit("A", rec.op("A", "x", fail=[ConnectionError("down")] * 10))
    assert len(rec.calls) == scheduler.max_retries + 1


async def test_platform_refusals_fail_at_once_without_retry(scheduler: OutboundScheduler) -> None:
    rec = Recorder()
    with pytest.raises(PlatformError, match="chat not found"):
        await scheduler.submit("A", rec.op("A", "x", fail=[PlatformError("chat not found")]))
    assert len(rec.calls) == 1
    assert await scheduler.submit("A", rec.op("A", "y")) == "y"  # the lane goes on


async def test_a_rate_limited_interim_edit_is_superseded_by_a_newer_frame(scheduler: OutboundScheduler) -> None:
    rec = Recorder()
    old = scheduler.enqueue("A", rec.op("A", "old", fail=[PlatformError("429", retry_after=0.15)]),
                            interim=True, merge_key="m1")
    await asyncio.sleep(0.02)  # "old" has run and been refused; the chat is paused
    new = scheduler.enqueue("A", rec.op("A", "new"), interim=True, merge_key="m1")
    assert await old is DROPPED
    assert await new == "new"
    assert rec.labels("A") == ["old", "new"]
    assert rec.times("A")[1] - rec.times("A")[0] >= 0.15 - EPS


async def test_the_global_rate_caps_calls_across_all_chats() -> None:
    s = OutboundScheduler(0.0, global_rate=40, global_burst=1)
    rec = Recorder()
    try:
        await asyncio.gather(*(s.enqueue(f"chat{i}", rec.op(f"chat{i}", "x")) for i in range(8)))
    finally:
        await s.stop()
    times = sorted(t for t, _, _ in rec.calls)
    assert min(gaps(times)) >= 1 / 40 - EPS
    assert times[-1] - times[0] >= 7 / 40 - EPS


async def test_a_spare_call_is_dropped_when_the_global_rate_has_no_token_left() -> None:
    s = OutboundScheduler(0.0, global_rate=5, global_burst=1)
    rec = Recorder()
    try:
        assert await s.enqueue("A", rec.op("A", "answer")) == "answer"  # the one saved-up token
        assert await s.enqueue("B", rec.op("B", "typing"), interim=True, paced=False, spare=True) is DROPPED
    finally:
        await s.stop()
    assert rec.labels("B") == []


async def test_a_spare_call_never_takes_the_token_a_waiting_call_waits_for() -> None:
    s = OutboundScheduler(0.0, global_rate=20, global_burst=1)
    rec = Recorder()
    try:
        first = s.enqueue("A", rec.op("A", "answer 1"))
        second = s.enqueue("B", rec.op("B", "answer 2"))  # waits 50 ms for the next token
        await asyncio.sleep(0.01)
        typing = s.enqueue("C", rec.op("C", "typing"), interim=True, paced=False, spare=True)
        assert await asyncio.gather(first, second, typing) == ["answer 1", "answer 2", DROPPED]
    finally:
        await s.stop()


async def test_a_spare_call_runs_while_the_global_rate_has_tokens_to_spare() -> None:
    s = OutboundScheduler(0.0, global_rate=30)
    rec = Recorder()
    try:
        assert await s.enqueue("A", rec.op("A", "typing"), interim=True, paced=False, spare=True) == "typing"
    finally:
        await s.stop()


async def test_unpaced_calls_do_not_use_up_the_chat_interval(scheduler: OutboundScheduler) -> None:
    rec = Recorder()
    typing = scheduler.enqueue("A", rec.op("A", "typing"), paced=False)
    send = scheduler.enqueue("A", rec.op("A", "send"))
    await asyncio.gather(typing, send)
    assert rec.times("A")[1] - rec.times("A")[0] < INTERVAL / 2


async def test_stop_drains_finals_and_drops_pending_interims() -> None:
    s = OutboundScheduler(INTERVAL)
    rec = Recorder()
    finals = [s.enqueue("A", rec.op("A", f"final{i}")) for i in range(3)]
    interim = s.enqueue("A", rec.op("A", "interim"), interim=True, merge_key="m")
    await s.stop(timeout=2)
    assert [f.result() for f in finals] == ["final0", "final1", "final2"]
    assert interim.result() is DROPPED
    with pytest.raises(PlatformError):
        s.enqueue("A", rec.op("A", "late"))


async def test_stop_fails_what_could_not_drain_in_time() -> None:
    s = OutboundScheduler(0.5)
    rec = Recorder()
    finals = [s.enqueue("A", rec.op("A", f"final{i}")) for i in range(3)]
    await s.stop(timeout=0.1)
    assert finals[0].result() == "final0"
    for future in finals[1:]:
        with pytest.raises(PlatformError):
            future.result()


async def test_idle_chat_lanes_are_released() -> None:
    s = OutboundScheduler(0.01, idle_timeout=0.05)
    rec = Recorder()
    await asyncio.gather(*(s.submit(f"chat{i}", rec.op(f"chat{i}", "x")) for i in range(5)))
    assert len(s._lanes) == 5
    await asyncio.sleep(0.15)
    assert len(s._lanes) == 0
    assert await s.submit("chat0", rec.op("chat0", "again")) == "again"
    await s.stop()
