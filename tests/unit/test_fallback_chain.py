"""Fallback across providers per turn, and recovery of broken streams, with the real SDKs against the fake LLM
(primary Anthropic, fallback OpenAI)."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterator

import pytest
from fakes.fake_llm import FakeLLM, RecordedRequest, Reply

from hermes_engine.errors import ConfigError, ProviderError
from hermes_engine.ports.conversation import Message
from hermes_engine.ports.models import ModelResponse, Restart, StreamBroken
from hermes_engine.providers import (
    AnthropicProvider,
    Completed,
    ModelRequest,
    OpenAIProvider,
    Provider,
    ProviderChain,
    ProviderOptions,
    StreamEvent,
    TextDelta,
    build_chain,
    register_provider,
)
from hermes_engine.providers.chain import STREAM_ATTEMPTS
from hermes_engine.providers.registry import REGISTRY

REQUEST = ModelRequest(system="You are Hermes.", messages=(Message("user", "hi"),))


@pytest.fixture
async def chain(fake_llm: FakeLLM) -> AsyncIterator[ProviderChain]:
    primary = AnthropicProvider("claude-test", api_key="test-key", base_url=fake_llm.anthropic_base_url,
                                max_retries=1)
    fallback = OpenAIProvider("gpt-test", api_key="test-key", base_url=fake_llm.openai_base_url, max_retries=0)
    chain = ProviderChain([primary, fallback])
    yield chain
    await chain.aclose()


def primary_down(status: int = 429) -> object:
    def respond(request: RecordedRequest) -> Reply:
        if request.api == "anthropic":
            return Reply(error=status, retry_after=0)
        return Reply(text="fallback here")
    return respond


async def text_of(provider: Provider) -> str:
    parts = []
    async for event in provider.stream(REQUEST):
        if isinstance(event, Completed):
            assert event.response.text == "".join(parts)
            return event.response.text
        parts.append(event.text)
    raise AssertionError("no Completed event")


async def test_rate_limited_primary_hands_the_rest_of_the_turn_to_the_fallback(
        chain: ProviderChain, fake_llm: FakeLLM) -> None:
    fake_llm.responder = primary_down(429)
    turn = chain.route()

    first = await text_of(turn)
    second = await text_of(turn)

    assert first == second == "fallback here"
    assert turn.spec == "openai:gpt-test" and turn.fell_back
    # the primary was tried once (plus one SDK retry), then both calls of the turn went to the fallback
    assert [r.api for r in fake_llm.requests] == ["anthropic", "anthropic", "openai", "openai"]


async def test_next_turn_tries_the_primary_first_again(chain: ProviderChain, fake_llm: FakeLLM) -> None:
    fake_llm.responder = primary_down(429)
    await text_of(chain.route())
    fake_llm.requests.clear()
    fake_llm.responder = lambda request: Reply(text=f"{request.api} answers")

    answer = await text_of(chain.route())

    assert answer == "anthropic answers"
    assert [r.api for r in fake_llm.requests] == ["anthropic"]


async def test_fallback_is_logged_with_the_reason(chain: ProviderChain, fake_llm: FakeLLM,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    fake_llm.responder = primary_down(503)

    with caplog.at_level(logging.WARNING, logger="hermes_engine.providers.chain"):
        await text_of(chain.route())

    [record] = caplog.records
    assert "anthropic:claude-test" in record.getMessage() and "HTTP 503" in record.getMessage()
    assert "openai:gpt-test" in record.getMessage()


async def events_of(provider: Provider, seen: list[StreamEvent] | None = None) -> list[StreamEvent]:
    """Every event of one call, in order (also into `seen`, to inspect them after an error)."""
    events = [] if seen is None else seen
    async for event in provider.stream(REQUEST):
        events.append(event)
    return events


def shown(events: list[StreamEvent]) -> str:
    """The text a reader keeps: the deltas after the last `Restart`."""
    kept: list[str] = []
    for event in events:
        if isinstance(event, Restart):
            kept.clear()
        elif isinstance(event, TextDelta):
            kept.append(event.text)
    return "".join(kept)


async def test_stream_cut_after_text_is_asked_again_and_the_partial_text_taken_back(
        chain: ProviderChain, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(text="half an answer and then", disconnect_after_chars=6), Reply(text="the whole answer"))

    events = await events_of(chain.route())

    assert [e.text for e in events[:2] if isinstance(e, TextDelta)] == ["half ", "a"]
    assert isinstance(events[2], Restart) and [e for e in events if isinstance(e, Restart)] == [events[2]]
    assert shown(events) == "the whole answer"
    assert isinstance(events[-1], Completed) and events[-1].response.text == "the whole answer"
    assert [r.api for r in fake_llm.requests] == ["anthropic", "anthropic"]  # the same model, asked again


async def test_stream_cut_on_every_attempt_goes_to_the_fallback_after_taking_back_the_text(
        chain: ProviderChain, fake_llm: FakeLLM) -> None:
    fake_llm.responder = lambda request: (Reply(text="never finished here", disconnect_after_chunks=2)
                                          if request.api == "anthropic" else Reply(text="fallback here"))
    turn = chain.route()

    events = await events_of(turn)

    assert [r.api for r in fake_llm.requests] == ["anthropic"] * STREAM_ATTEMPTS + ["openai"]
    assert sum(isinstance(e, Restart) for e in events) == STREAM_ATTEMPTS  # each partial taken back
    assert shown(events) == "fallback here" and turn.fell_back


async def test_stream_cut_before_any_text_is_asked_again_without_a_restart(chain: ProviderChain,
                                                                          fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(text="lost", disconnect_after_chunks=0), Reply(text="found"))

    events = await events_of(chain.route())

    assert not any(isinstance(e, Restart) for e in events) and shown(events) == "found"
    assert [r.api for r in fake_llm.requests] == ["anthropic", "anthropic"]


async def test_tool_call_cut_half_received_is_dropped_and_never_reported(chain: ProviderChain,
                                                                         fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(text="Let me look", tool_calls=[("get_time", {"tz": "Europe/Paris"})],
                          disconnect_after_chunks=4),  # three words and half the arguments
                    Reply(text="It is noon."))

    events = await events_of(chain.route())

    [completed] = [e for e in events if isinstance(e, Completed)]
    assert completed.response.tool_calls == [] and completed.response.text == "It is noon."
    assert shown(events) == "It is noon."


async def test_without_a_fallback_the_last_broken_stream_is_raised_after_every_attempt(
        fake_llm: FakeLLM) -> None:
    only = ProviderChain([AnthropicProvider("claude-test", api_key="test-key",
                                            base_url=fake_llm.anthropic_base_url, max_retries=0)])
    fake_llm.responder = lambda request: Reply(text="cut every time", disconnect_after_chunks=1)
    seen: list[StreamEvent] = []

    with pytest.raises(StreamBroken) as caught:
        await events_of(only.route(), seen)

    assert caught.value.fallback_eligible and caught.value.status is None
    assert len(fake_llm.requests) == STREAM_ATTEMPTS
    assert sum(isinstance(e, Restart) for e in seen) == STREAM_ATTEMPTS - 1  # the last partial stays for the error
    await only.aclose()


class _FailsAfterCompleted:
    """A provider whose connection fails once the answer is complete."""

    spec = "scripted:after-completed"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        self.calls += 1
        yield TextDelta("done")
        yield Completed(ModelResponse(text="done", model=self.spec))
        raise ProviderError("connection reset after the end", provider=self.spec)

    async def aclose(self) -> None:
        pass


async def test_stream_that_fails_after_completed_is_not_a_failure() -> None:
    provider = _FailsAfterCompleted()

    events = await events_of(ProviderChain([provider]).route())

    assert shown(events) == "done" and isinstance(events[-1], Completed)
    assert provider.calls == 1


async def test_bad_request_is_not_fallback_eligible(chain: ProviderChain, fake_llm: FakeLLM) -> None:
    fake_llm.responder = primary_down(400)

    with pytest.raises(ProviderError) as caught:
        await text_of(chain.route())

    assert caught.value.status == 400
    assert [r.api for r in fake_llm.requests] == ["anthropic"]


async def test_when_every_provider_fails_the_last_error_is_raised(chain: ProviderChain, fake_llm: FakeLLM) -> None:
    fake_llm.responder = lambda request: Reply(error=429 if request.api == "anthropic" else 503, retry_after=0)

    with pytest.raises(ProviderError) as caught:
        await text_of(chain.route())

    assert caught.value.status == 503 and caught.value.provider == "openai:gpt-test"


def test_router_and_chain_satisfy_the_provider_protocol(chain: ProviderChain) -> None:
    assert isinstance(chain, Provider)
    assert isinstance(chain.route(), Provider)
    assert chain.spec == chain.route().spec == "anthropic:claude-test"


def test_chain_needs_at_least_one_provider() -> None:
    with pytest.raises(ValueError):
        ProviderChain([])


# -- build_chain: the one way from specs to a chain -------------------------------------------------------


async def test_build_chain_puts_the_primary_first_and_serves_from_the_environment(
        fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": fake_llm.anthropic_base_url,
                        "OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": fake_llm.openai_base_url}.items():
        monkeypatch.setenv(name, value)
    fake_llm.responder = primary_down(503)

    chain = build_chain(["anthropic:claude-test", "openai:gpt-test"], max_retries=0)
    try:
        assert [p.spec for p in chain.providers] == ["anthropic:claude-test", "openai:gpt-test"]
        assert await text_of(chain.route()) == "fallback here"
    finally:
        await chain.aclose()


@pytest.fixture
def counted_builds() -> Iterator[list[str]]:
    """A registered kind that records every provider it builds."""
    built: list[str] = []

    def factory(model: str, options: ProviderOptions) -> Provider:
        built.append(model)
        return OpenAIProvider(model, api_key="k", base_url="http://127.0.0.1:9/v1", max_retries=options.max_retries)

    register_provider("counted", factory)
    yield built
    REGISTRY.unregister("counted")


@pytest.mark.parametrize(("fallback", "sentence"), [
    ("openai:gpt-4.1", "^OPENAI_API_KEY is not set"),
    ("gemini:pro", "^Model provider 'gemini' in 'gemini:pro' is unknown; use one of "),
    ("gpt-4.1", "is not of the form provider:model"),
])
def test_build_chain_checks_every_spec_and_key_before_building_any(
        counted_builds: list[str], monkeypatch: pytest.MonkeyPatch, fallback: str, sentence: str) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    with pytest.raises(ConfigError, match=sentence):
        build_chain(["counted:primary", fallback])

    assert counted_builds == []

