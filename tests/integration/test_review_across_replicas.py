"""The background review across replicas on one database: it is marked due before it runs, runs under the
session's review lease, and a review cut off with its replica is run once by another."""

from __future__ import annotations

import asyncio
import inspect

from engine_harness import make_profile
from fakes.fake_llm import Reply

REVIEW = "[Background review"
FACT = "User deploys with Ansible."
BOT = "testbot"


class Reviewer:
    """A fake-LLM responder: turns answer at once; the first review call waits for `release`, later ones
    save FACT with the memory tool and close."""

    def __init__(self, first_reply: Reply) -> None:
        self.first_reply = first_reply
        self.asked = asyncio.Event()
        self.release = asyncio.Event()
        self.review_calls: list[object] = []  # first calls of reviews
        self.tool_results = 0  # review calls that follow the memory tool's result
        self.turn_systems: list[str] = []

    async def __call__(self, request) -> Reply:
        if REVIEW not in request.last_user_text:
            self.turn_systems.append(request.system)
            return Reply(text="answer")
        if any(m["role"] == "tool" for m in request.messages[-2:]):
            self.tool_results += 1
            return Reply(text="Saved.")
        self.review_calls.append(request)
        if len(self.review_calls) == 1:
            self.asked.set()
            await self.release.wait()
            return self.first_reply
        return Reply(tool_calls=[("memory", {"action": "add", "target": "memory", "content": FACT})])


async def start_replica(engine, monkeypatch, name: str):
    monkeypatch.setenv("HERMES_REPLICA_ID", name)
    return await engine(profile=make_profile(review={"memory_every_turns": 1, "skill_every_iterations": 0}))


async def until(condition, what: str, tries: int = 3000) -> None:
    """Wait for `condition()` (a bool, or awaitable of one) to hold; 30 s at most."""
    for _ in range(tries):
        held = condition()
        if await held if inspect.isawaitable(held) else held:
            return
        await asyncio.sleep(0.01)
    raise TimeoutError(f"never: {what}")


def counting_sweeps(replica) -> list[int]:
    """Count the due reviews each of the replica's store reads found."""
    found: list[int] = []
    real = replica.store.due_reviews

    async def due_reviews(bot, session_id=None):
        due = await real(bot, session_id)
        if session_id is None:
            found.append(len(due))
        return due

    replica.store.due_reviews = due_reviews
    return found


async def test_a_review_cut_off_when_its_replica_stops_is_run_once_by_another(engine, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_SESSION_LEASE_SECONDS", "1.5")  # every replica looks every 0.5 s
    reviewer = Reviewer(Reply(text="Nothing to save."))  # what replica a never hears
    fake_llm.responder = reviewer
    a = await start_replica(engine, monkeypatch, "replica-a")
    assert await a.say("I deploy with Ansible") == "answer"
    await asyncio.wait_for(reviewer.asked.wait(), 30)  # a's review is in its model call
    [due] = await a.store.due_reviews(BOT)
    b = await start_replica(engine, monkeypatch, "replica-b")
    sweeps = counting_sweeps(b)
    await a.stop()  # cancels the review; its record stays due
    assert [d.session_id for d in await b.store.due_reviews(BOT)] == [due.session_id]

    async def cleared() -> bool:
        return await b.store.due_reviews(BOT) == []

    await until(cleared, "replica b ran the review")
    await b.idle(timeout=30)
    await until(lambda: len(sweeps) >= 2, "replica b looked again")  # nothing is run a second time
    reviewer.release.set()
    assert len(reviewer.review_calls) == 2  # a's, cut off, and b's
    assert reviewer.tool_results == 1  # the memory write ran once, on b
    rerun = reviewer.review_calls[1]
    assert rerun.system == reviewer.turn_systems[0]  # b read the session's frozen prompt from the store
    assert any("I deploy with Ansible" in str(m.get("content")) for m in rerun.messages)  # and its history
    assert FACT in await b.say("/memory")


async def test_two_replicas_never_review_one_session_at_once(engine, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_SESSION_LEASE_SECONDS", "1.5")
    reviewer = Reviewer(Reply(tool_calls=[("memory", {"action": "add", "target": "memory", "content": FACT})]))
    fake_llm.responder = reviewer
    a = await start_replica(engine, monkeypatch, "replica-a")
    assert await a.say("I deploy with Ansible") == "answer"
    await asyncio.wait_for(reviewer.asked.wait(), 30)  # a reviews the session
    b = await start_replica(engine, monkeypatch, "replica-b")
    sweeps = counting_sweeps(b)
    await until(lambda: len(sweeps) >= 3, "replica b looked three times")
    await b.idle(timeout=30)
    assert len(reviewer.review_calls) == 1  # b left it to a
    assert sweeps[:3] == [1, 1, 1]  # each time finding it due
    reviewer.release.set()

    async def cleared() -> bool:
        return await a.store.due_reviews(BOT) == []

    await until(cleared, "replica a finished the review")
    await a.idle(timeout=30)
    seen = len(sweeps)
    await until(lambda: len(sweeps) >= seen + 2, "replica b looked again")
    await b.idle(timeout=30)
    assert len(reviewer.review_calls) == 1 and reviewer.tool_results == 1
    assert FACT in await a.say("/memory")


async def test_a_review_that_fails_for_good_is_cleared_not_retried(engine, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_SESSION_LEASE_SECONDS", "1.5")
    review_calls = []

    def respond(request) -> Reply:
        if REVIEW in request.last_user_text:
            review_calls.append(request)
            return Reply(error=400, error_message="the review's request was refused")
        return Reply(text="answer")

    fake_llm.responder = respond
    a = await start_replica(engine, monkeypatch, "replica-a")
    sweeps = counting_sweeps(a)
    assert await a.say("I deploy with Ansible") == "answer"

    async def cleared() -> bool:
        return bool(review_calls) and await a.store.due_reviews(BOT) == []

    await until(cleared, "the failed review was cleared")
    seen = len(sweeps)
    await until(lambda: len(sweeps) >= seen + 2, "replica a looked again")
    await a.idle(timeout=30)
    assert len(review_calls) == 1
