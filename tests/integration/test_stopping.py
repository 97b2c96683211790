"""A gateway winding down: a message that comes while it stops is kept for the next start, not begun."""

from __future__ import annotations

import asyncio
from typing import Any

from fakes.fake_llm import Reply


async def test_a_message_that_comes_while_the_gateway_stops_is_kept_and_answered_after_the_restart(engine,
                                                                                                  fake_llm):
    fake_llm.responder = lambda request: Reply(text=f"Got: {request.last_user_text}")
    first = await engine()
    await first.gateway.stop()
    assert await first.gateway.handle(first.message("said while it stopped")) is True
    assert not first.gateway.busy  # no turn begun on a gateway that has stopped
    assert [e.status for e in await first.store.pending_inbound()] == ["received"]

    second = await engine()  # the restart, on the same home and database
    await second.outlet.wait_for(1)
    assert second.outlet.texts == ["Got: said while it stopped"]
    assert first.outlet.texts == [] and len(fake_llm.requests) == 1


async def test_the_grace_finishes_the_turn_in_flight_and_begins_none_queued_behind_it(engine, fake_llm):
    first, asked = await a_turn_in_flight(engine, fake_llm, "first", answer_after=0.05)
    await first.gateway.handle(first.message("second"))  # the same session: queued behind "first"
    await first.gateway.finish_turns(10)
    await first.gateway.stop()
    assert asked == ["first"] and first.outlet.texts == ["Got: first"]  # finished, and nothing begun to be cut
    assert [e.payload["message"]["text"] for e in await first.store.pending_inbound()] == ["second"]

    second = await engine()
    await second.outlet.wait_for(1)
    assert second.outlet.texts == ["Got: second"]


async def a_turn_in_flight(engine, fake_llm, text: str = "long job", *,
                           answer_after: float = 1.0) -> tuple[Any, list[str]]:
    """A started gateway whose model is answering `text` (its stream spread over `answer_after` per word),
    and the list of what the model was asked."""
    asked: list[str] = []
    working = asyncio.Event()

    def respond(request):
        asked.append(request.last_user_text)
        working.set()
        return Reply(text=f"Got: {request.last_user_text}", delay=answer_after)

    fake_llm.responder = respond
    first = await engine()
    await first.gateway.handle(first.message(text))
    await asyncio.wait_for(working.wait(), 10)
    return first, asked


async def left_for_the_restart(first, engine) -> tuple[list[str], list[str]]:
    """What the stopped gateway left in its inbox, and what a restart on the same database then says."""
    pending = [e.payload["message"]["text"] for e in await first.store.pending_inbound()]
    second = await engine()
    await second.idle()
    return pending, second.outlet.texts


async def test_a_stop_asked_during_the_grace_is_honoured_and_the_turn_is_not_answered_after_the_restart(
        engine, fake_llm):
    first, asked = await a_turn_in_flight(engine, fake_llm)
    grace = asyncio.create_task(first.gateway.finish_turns(5))  # SIGTERM while the turn streams
    await first.gateway.handle(first.message("/stop"))  # an immediate command still runs in the grace
    await grace
    await first.gateway.stop()
    assert await left_for_the_restart(first, engine) == ([], [])  # stopped by the person: nothing to answer
    assert asked == ["long job"]


async def test_a_stop_asked_just_before_sigterm_ends_the_turn_as_stopped(engine, fake_llm):
    first, asked = await a_turn_in_flight(engine, fake_llm)
    await first.gateway.handle(first.message("/stop"))
    await first.gateway.finish_turns(5)
    await first.gateway.stop()
    assert await left_for_the_restart(first, engine) == ([], [])
    assert asked == ["long job"]
