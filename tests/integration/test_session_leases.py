"""Two gateways (replicas) on one database: a session's turns run on the replica holding its lease, and a
replica leaves to that one what it receives for the session meanwhile, and what it finds pending at start."""

from __future__ import annotations

import asyncio

import pytest
from engine_harness import stored_tool_results
from fakes.fake_llm import Reply

from hermes_engine.ports.leases import session_lease

pytestmark = pytest.mark.slow  # waits out lease takeovers between replicas: `pytest -m slow`


def answer_slowly(request) -> Reply:
    return Reply(text=f"answer to {request.last_user_text}", delay=0.5)


async def start_replica(engine, monkeypatch, name: str):
    monkeypatch.setenv("HERMES_REPLICA_ID", name)
    return await engine()


async def asked(fake_llm, text: str) -> None:
    for _ in range(1000):
        if any(text in r.last_user_text for r in fake_llm.requests):
            return
        await asyncio.sleep(0.01)
    raise TimeoutError(f"the model was never asked about {text!r}")


async def test_a_message_for_a_session_another_replica_holds_is_answered_there_after_its_turn(
        engine, fake_llm, monkeypatch):
    fake_llm.responder = answer_slowly
    a = await start_replica(engine, monkeypatch, "replica-a")
    b = await start_replica(engine, monkeypatch, "replica-b")
    await a.gateway.handle(a.message("first"))
    await asked(fake_llm, "first")  # replica a is in the session's turn, holding its lease
    await b.gateway.handle(b.message("second"))  # same person, same chat, the other replica
    delivered = await a.outlet.wait_for(2)
    await a.idle()
    await b.idle()
    assert [d.text for d in delivered] == ["answer to first", "answer to second"]  # in order, by the holder
    assert b.outlet.texts == []
    assert [r.last_user_text for r in fake_llm.requests] == ["first", "second"]  # one turn each
    assert await a.store.pending_inbound() == []


async def test_a_message_another_replica_takes_while_the_holder_waits_for_the_next_is_answered_once_in_time(
        engine, fake_llm, monkeypatch):
    """The holder keeps the session's lease a third of its time after a turn, for the session's next message;
    one that reaches the other replica meanwhile waits in the inbox no longer than that, and is answered once."""
    monkeypatch.setenv("HERMES_SESSION_LEASE_SECONDS", "3")
    fake_llm.responder = lambda request: Reply(text=f"answer to {request.last_user_text}")
    a = await start_replica(engine, monkeypatch, "replica-a")
    b = await start_replica(engine, monkeypatch, "replica-b")
    assert await a.say("first") == "answer to first"
    assert a.gateway.holding  # waiting for the session's next message, under its lease
    started = asyncio.get_running_loop().time()
    await b.gateway.handle(b.message("second"))  # b finds the lease held: the inbox keeps it for a
    await a.outlet.wait_for(2, timeout=10)
    assert asyncio.get_running_loop().time() - started < 3  # within the wait (1 s) and a turn
    await a.let_go()
    await b.let_go()
    assert a.outlet.texts == ["answer to first", "answer to second"]
    assert b.outlet.texts == []
    assert [r.last_user_text for r in fake_llm.requests] == ["first", "second"]
    assert await a.store.pending_inbound() == []


async def test_a_replica_starting_beside_another_leaves_that_ones_turn_in_flight_alone(engine, fake_llm, monkeypatch):
    fake_llm.responder = answer_slowly
    a = await start_replica(engine, monkeypatch, "replica-a")
    await a.gateway.handle(a.message("in flight"))
    await asked(fake_llm, "in flight")
    b = await start_replica(engine, monkeypatch, "replica-b")  # finds the event pending at start
    await a.outlet.wait_for(1)
    await a.idle()
    await b.idle()
    assert a.outlet.texts == ["answer to in flight"]
    assert b.outlet.texts == []  # not answered twice
    assert len(fake_llm.requests) == 1


async def test_a_replica_that_lost_a_sessions_lease_mid_turn_stops_and_the_new_holder_answers_once(
        engine, fake_llm, monkeypatch, caplog):
    """A replica paused or cut off past the lease's time finds at its next renewal that another holds the
    session: it stops the turn without a word and leaves the message to the new holder."""
    monkeypatch.setenv("HERMES_SESSION_LEASE_SECONDS", "1.5")
    first_call = asyncio.Event()

    def respond(request) -> Reply:
        if "first" in request.last_user_text and not first_call.is_set():
            first_call.set()
            return Reply(text="the answer replica a never gives", delay=60)
        return Reply(text=f"answer to {request.last_user_text}")

    fake_llm.responder = respond
    a = await start_replica(engine, monkeypatch, "replica-a")
    b = await start_replica(engine, monkeypatch, "replica-b")
    msg = a.message("first")
    await a.gateway.handle(msg)
    await asyncio.wait_for(first_call.wait(), 30)
    lease = session_lease(a.gateway.bot, a.gateway.session_key(msg))
    await a.store.release_lease(lease, a.gateway.leases.holder)  # as if a's lease ran out while it was paused
    assert await b.store.acquire_lease(lease, b.gateway.leases.holder, 1.5)
    await b.outlet.wait_for(1, 30)  # b takes the pending message over
    await b.idle()
    await a.idle()
    assert b.outlet.texts == ["answer to first"]
    # a's reply is dropped without a note (no "Stopped."): the turn is b's now
    assert [(d.kind, d.text) for d in a.outlet.delivered] == [("abort", "")]
    assert "was taken by another replica while held here" in caplog.text
    assert await a.store.pending_inbound() == []
    a.outlet.delivered.clear()
    await b.let_go()  # b has given the session back: the next message is a's to answer
    assert await a.say("second", timeout=30) == "answer to second"  # a's lane goes on


async def test_a_turn_taken_over_from_a_replica_goes_on_from_its_stored_tool_result_without_running_it_again(
        engine, fake_llm, monkeypatch):
    """The new holder replays the turn from what the old one stored: the model sees the tool's result, and
    the tool (a memory write) is not run a second time."""
    monkeypatch.setenv("HERMES_SESSION_LEASE_SECONDS", "1.5")
    taken_over = asyncio.Event()

    def respond(request) -> Reply:
        done = any(m["role"] == "tool" for m in request.messages)
        if not taken_over.is_set():
            return Reply(text="never finished on replica a", delay=60) if done else remember("Likes green tea")
        return Reply(text="Noted.") if done else remember("Likes green tea, as said before")

    fake_llm.responder = respond
    a = await start_replica(engine, monkeypatch, "replica-a")
    b = await start_replica(engine, monkeypatch, "replica-b")
    msg = a.message("remember that I like green tea")
    await a.gateway.handle(msg)
    for _ in range(1000):  # the tool's result is stored and the next model call hangs
        if len(fake_llm.requests) >= 2 and await asyncio.to_thread(stored_tool_results, a.home):
            break
        await asyncio.sleep(0.02)
    lease = session_lease(a.gateway.bot, a.gateway.session_key(msg))
    taken_over.set()
    await a.store.release_lease(lease, a.gateway.leases.holder)
    assert await b.store.acquire_lease(lease, b.gateway.leases.holder, 1.5)
    await b.outlet.wait_for(1, 30)
    await b.idle()
    await a.idle()
    assert b.outlet.texts == ["Noted."]
    memory = "\n".join(p.read_text(encoding="utf-8") for p in a.home.rglob("MEMORY.md"))
    assert memory.count("Likes green tea") == 1 and "as said before" not in memory


def remember(content: str) -> Reply:
    return Reply(tool_calls=[("memory", {"action": "add", "target": "memory", "content": content})])
