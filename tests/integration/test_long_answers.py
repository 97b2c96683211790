"""Answers longer than one model call may write, through the real gateway, both SDKs (streaming) and the
fake LLM: each call asks for the model's own output maximum, and an answer cut at it goes on in the same
reply until it is whole, or says in one line that it was cut."""

from __future__ import annotations

from typing import Any

import pytest
from engine_harness import make_profile
from fakes.fake_llm import RecordedRequest, Reply
from postgres import BACKENDS, empty_database

from hermes_engine.agent.long_answers import CUT_NOTE
from hermes_engine.providers.continuation import CONTINUE
from hermes_engine.tools.registry import tool

MODELS = {"anthropic": "anthropic:claude-sonnet-4-5", "openai": "openai:gpt-4.1"}
PARTS = ["The first part of a long answer, cut in the mid", "dle of a word; the second part goes on, ",
         "and the third one too, and so on ", "until the fourth part ends it."]


@pytest.fixture(params=sorted(MODELS))
def model(request: pytest.FixtureRequest) -> str:
    return MODELS[request.param]


@pytest.fixture(params=BACKENDS)
async def database(request: pytest.FixtureRequest, tmp_path):
    """The store of a test whose answer is kept and read back: a SQLite file, or a PostgreSQL schema."""
    async with empty_database(request.param, str(tmp_path / "store.db")) as found:
        yield found


def without_breakpoints(value: Any) -> Any:
    """The wire messages without Anthropic's `cache_control`: it marks where a cache entry is written and
    is not part of the prefix the cache matches."""
    if isinstance(value, dict):
        return {k: without_breakpoints(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_breakpoints(v) for v in value]
    return value


def assert_extends(earlier: RecordedRequest, later: RecordedRequest) -> None:
    """`later` sends everything `earlier` sent, unchanged and in front: the provider's cached prefix."""
    sent = without_breakpoints(earlier.messages)
    assert without_breakpoints(later.messages)[:len(sent)] == sent
    assert later.body.get("system") == earlier.body.get("system") and later.tools == earlier.tools


def tool_results(request: RecordedRequest) -> list[str]:
    """The tool results of the newest step, in either wire format."""
    last = request.messages[-1]
    if last["role"] == "tool":
        return [m["content"] for m in request.messages if m["role"] == "tool"]
    return [block["content"][0]["text"] for block in last["content"] if block.get("type") == "tool_result"]


def tool_arguments(request: RecordedRequest) -> list[Any]:
    """The arguments of the tool calls the newest step answers, as the request sends them again."""
    assistant = next(m for m in reversed(request.messages) if m["role"] == "assistant")
    if "tool_calls" in assistant:
        return [c["function"]["arguments"] for c in assistant["tool_calls"]]
    return [b["input"] for b in assistant["content"] if b.get("type") == "tool_use"]


async def test_an_answer_cut_at_the_output_limit_goes_on_in_the_same_reply_and_arrives_whole(engine, fake_llm,
                                                                                             model, database):
    e = await engine(profile=make_profile(model=model), database=database)
    fake_llm.script(Reply(text=PARTS[0], at_limit=True), Reply(text=PARTS[1]))

    assert await e.say("tell me everything") == PARTS[0] + PARTS[1]
    [delivered] = e.outlet.delivered
    assert "".join(delivered.deltas) == PARTS[0] + PARTS[1]  # both parts streamed into the one reply
    first, continued = fake_llm.requests
    assert continued.last_user_text == CONTINUE
    assert continued.texts[-2:] == [PARTS[0], CONTINUE]
    session = next(iter(e.gateway.sessions.values()))
    stored = await e.store.load_messages(session.record.id)
    assert [(m.role, m.content) for m in stored] == [("user", "tell me everything"), ("assistant", PARTS[0]),
                                                     ("assistant", PARTS[1])]


async def test_each_continuation_repeats_the_request_before_it_and_adds_to_its_end(engine, fake_llm, model):
    e = await engine(profile=make_profile(model=model))
    fake_llm.script(*(Reply(text=p, at_limit=True) for p in PARTS[:3]), Reply(text=PARTS[3]))

    assert await e.say("tell me everything") == "".join(PARTS)
    requests = fake_llm.requests
    assert len(requests) == 4
    for earlier, later, part in zip(requests, requests[1:], PARTS, strict=False):
        assert_extends(earlier, later)
        assert later.texts[len(earlier.messages):] == [part, CONTINUE]
    assert CUT_NOTE not in e.outlet.delivered[0].text


async def test_an_answer_still_cut_after_three_continuations_ends_with_the_one_line_note(engine, fake_llm, model):
    e = await engine(profile=make_profile(model=model))
    fake_llm.script(*(Reply(text=p, at_limit=True) for p in PARTS))

    assert await e.say("tell me everything") == "".join(PARTS) + "\n\n" + CUT_NOTE
    assert len(fake_llm.requests) == 4  # the first call and three continuations, no more


async def test_the_next_turn_sends_a_cut_answer_as_its_turn_sent_it_also_when_read_back_from_the_store(
        engine, fake_llm, model, database):
    e = await engine(profile=make_profile(model=model), database=database)
    fake_llm.script(Reply(text=PARTS[0], at_limit=True), Reply(text=PARTS[1]), Reply(text="Glad to."))
    await e.say("tell me everything")
    session = next(iter(e.gateway.sessions.values()))
    session.history = None  # read again from the store, as after an eviction or a restart

    assert await e.say("thanks") == "Glad to."
    _, continued, next_turn = fake_llm.requests
    assert_extends(continued, next_turn)
    assert next_turn.texts[len(continued.messages):] == [PARTS[1], next_turn.last_user_text]


async def engine_saving_notes(engine, model: str, saved: list[str]):
    """An engine on `model` with a `save_note` tool that records each note it is given in `saved`."""
    @tool(toolset="test")
    def save_note(text: str) -> str:
        """Save a note."""
        saved.append(text)
        return "saved"

    e = await engine(profile=make_profile(model=model))
    e.gateway.tools.register(save_note)
    return e


async def test_tool_calls_cut_at_the_output_limit_are_not_run_and_the_model_makes_them_again(engine, fake_llm,
                                                                                            model):
    saved: list[str] = []
    e = await engine_saving_notes(engine, model, saved)
    fake_llm.script(Reply(text="Saving both.", tool_calls=[("save_note", {"text": "short"}),
                                                          ("save_note", {"text": "a long note " * 40})],
                          at_limit=True),
                    Reply(tool_calls=[("save_note", {"text": "a shorter note"})]),
                    Reply(text="Saved."))

    assert await e.say("save my notes") == "Saved."
    assert saved == ["a shorter note"]  # neither call of the cut response ran, not even the complete one
    retried = fake_llm.requests[1]
    refusals = tool_results(retried)
    assert len(refusals) == 2 and all("Not run: the output limit cut your response off" in r for r in refusals)
    assert tool_arguments(retried) in (["{}", "{}"], [{}, {}])  # the cut arguments are not sent again


async def test_tool_calls_cut_again_and_again_end_the_turn_with_the_note_and_never_run(engine, fake_llm, model):
    saved: list[str] = []
    e = await engine_saving_notes(engine, model, saved)
    fake_llm.script(*(Reply(tool_calls=[("save_note", {"text": "a long note " * 40})], at_limit=True)
                      for _ in range(4)))

    assert await e.say("save my notes") == CUT_NOTE
    assert saved == [] and len(fake_llm.requests) == 4


@pytest.mark.parametrize(("model", "field", "maximum"), [("anthropic:claude-sonnet-4-5", "max_tokens", 64_000),
                                                         ("anthropic:claude-3-5-haiku-latest", "max_tokens", 8_192),
                                                         ("openai:gpt-4.1", "max_completion_tokens", 32_768),
                                                         ("openai:o4-mini", "max_completion_tokens", 100_000)])
@pytest.mark.parametrize("profile_limit", [None, 2_000, 1_000_000])
async def test_each_model_is_asked_for_its_own_output_maximum_and_a_lower_profile_limit_wins(
        engine, fake_llm, model, field, maximum, profile_limit):
    e = await engine(profile=make_profile(model=model, max_output_tokens=profile_limit))
    await e.say("hi")
    assert fake_llm.requests[0].body[field] == (2_000 if profile_limit == 2_000 else maximum)


async def test_a_fallback_model_is_asked_for_its_own_output_maximum(engine, fake_llm, monkeypatch):
    monkeypatch.setenv("HERMES_FALLBACK_MODELS", "openai:gpt-4o")
    e = await engine(profile=make_profile(model="anthropic:claude-3-5-haiku-20241022"))
    fake_llm.responder = lambda request: Reply(error=503) if request.api == "anthropic" else Reply(text="ok")

    assert await e.say("hi") == "ok"
    asked = {r.api: r.body.get("max_tokens") or r.body.get("max_completion_tokens") for r in fake_llm.requests}
    assert asked == {"anthropic": 8_192, "openai": 16_384}


async def test_a_call_asks_for_no_more_output_than_the_context_window_leaves_beside_its_request(engine, fake_llm):
    window = 12_000
    e = await engine(profile=make_profile(model="openai:o4-mini", context_window=window, max_output_tokens=8_000))
    fake_llm.script(Reply(tool_calls=[("calculate", {"expression": "6*7"})]), Reply(text="42"))

    assert await e.say("what is six times seven? " + "Some context for the question. " * 500) == "42"
    for request in fake_llm.requests:  # the fake counts a prompt as the provider would: size / 4
        assert 1_024 < request.body["max_completion_tokens"] <= window - request.size // 4
