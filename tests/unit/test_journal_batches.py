"""A turn's journal writes its steps in as few round trips as their order allows: the user message waits for
the next step, and steps that come while a write is under way go together in the next one, in order."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from hermes_engine.core.journal import Journal


class Recorder:
    """A store of batches that can be held mid-write, as a slow database would."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.gate: asyncio.Event | None = None
        self.writing = asyncio.Event()

    async def __call__(self, steps: Sequence[str]) -> None:
        self.writing.set()
        if self.gate is not None:
            await self.gate.wait()
        self.batches.append(list(steps))


async def test_the_user_message_goes_with_the_answer_in_one_write():
    store = Recorder()
    journal: Journal[str] = Journal(store)
    journal.write("user", hold=True)
    await asyncio.sleep(0.01)
    assert store.batches == []  # held: no round trip of its own
    journal.write("answer")
    await journal.flush()
    assert store.batches == [["user", "answer"]]


async def test_a_held_step_alone_is_written_at_the_flush():
    store = Recorder()
    journal: Journal[str] = Journal(store)
    journal.write("user", hold=True)
    await journal.flush()
    assert store.batches == [["user"]]


async def test_steps_that_come_during_a_write_go_together_in_the_next_in_order():
    store = Recorder()
    store.gate = asyncio.Event()
    journal: Journal[str] = Journal(store)
    journal.write("call")
    await store.writing.wait()
    journal.write("result 1")
    journal.write("result 2")
    store.gate.set()
    await journal.flush()
    assert store.batches == [["call"], ["result 1", "result 2"]]


async def test_after_a_failed_write_nothing_more_is_stored_and_every_later_write_raises_it():
    failures: list[BaseException] = []

    async def broken(steps: Sequence[str]) -> None:
        raise OSError("disk full")

    journal: Journal[str] = Journal(broken, on_failure=failures.append)
    journal.write("user", hold=True)
    journal.write("call")
    with pytest.raises(OSError):
        await journal.flush()
    assert [str(f) for f in failures] == ["disk full"]
    with pytest.raises(OSError):
        journal.write("result")
    await journal.settle()  # does not raise: the failure is kept
