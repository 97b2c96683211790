"""A gateway winding down: a message that comes while it stops is kept for the next start, not begun."""

from __future__ import annotations

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
