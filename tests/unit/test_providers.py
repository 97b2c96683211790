"""The providers, driven through the real anthropic and openai SDKs against the loopback fake LLM."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from pathlib import Path

import pytest
from fakes.fake_llm import FakeLLM, Reply

from hermes_engine.errors import ConfigError, ProviderError
from hermes_engine.ports.conversation import ImagePart, Message, ToolCall, Usage
from hermes_engine.ports.models import StreamBroken
from hermes_engine.providers import (
    AnthropicProvider,
    Completed,
    ModelRequest,
    ModelResponse,
    OpenAIProvider,
    Provider,
    ProviderKind,
    ProviderOptions,
    StreamEvent,
    TextDelta,
    ToolSchema,
    known_providers,
    make_provider,
    parse_model_spec,
    register_provider,
)
from hermes_engine.providers.registry import ENTRY_POINT_GROUP, REGISTRY, ProviderRegistry

API_KEY = "sk-test-0123456789abcdef"
PROVIDER_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                "OPENAI_COMPATIBLE_API_KEY", "OPENAI_COMPATIBLE_BASE_URL")

GET_TIME = ToolSchema("get_time", "Current time in a zone.",
                      {"type": "object", "properties": {"tz": {"type": "string"}}})
GET_WEATHER = ToolSchema("get_weather", "Weather for a city.",
                         {"type": "object", "properties": {"city": {"type": "string"}}})


@pytest.fixture(autouse=True)
def _no_real_provider_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's real keys or endpoints must neither leak into these tests nor be used by them."""
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


def make(api: str, fake: FakeLLM, *, max_retries: int = 0) -> Provider:
    if api == "anthropic":
        return AnthropicProvider("claude-test", api_key=API_KEY, base_url=fake.anthropic_base_url,
                                 max_retries=max_retries)
    return OpenAIProvider("gpt-test", api_key=API_KEY, base_url=fake.openai_base_url, max_retries=max_retries)


@pytest.fixture(params=["anthropic", "openai"])
def api(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def provider(api: str, fake_llm: FakeLLM) -> AsyncIterator[Provider]:
    p = make(api, fake_llm)
    yield p
    await p.aclose()


def ask(text: str = "What time is it?", **kwargs: object) -> ModelRequest:
    return ModelRequest(system="You are Hermes.", messages=(Message("user", text),), **kwargs)  # type: ignore[arg-type]


async def collect(provider: Provider, request: ModelRequest) -> tuple[list[str], ModelResponse]:
    deltas: list[str] = []
    completed: list[ModelResponse] = []
    async for event in provider.stream(request):
        assert not completed, "nothing may follow Completed"
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        else:
            assert isinstance(event, Completed)
            completed.append(event.response)
    assert len(completed) == 1
    return deltas, completed[0]


# -- streaming and parsing -------------------------------------------------------------------------------


async def test_text_deltas_arrive_in_order_then_exactly_one_completed(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(text="The quick brown fox"))

    deltas, response = await collect(provider, ask())

    assert deltas == ["The ", "quick ", "brown ", "fox"]
    assert response.text == "The quick brown fox"
    assert response.tool_calls == []
    assert response.stop_reason == "end_turn"
    assert response.model == provider.spec


async def test_parallel_tool_calls_are_parsed_in_call_order(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(text="Checking.", tool_calls=[("get_time", '{"tz": "UTC"}'),
                                                        ("get_weather", '{"city": "Oslo"}')]))

    _, response = await collect(provider, ask(tools=(GET_TIME, GET_WEATHER)))

    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("get_time", '{"tz": "UTC"}'), ("get_weather", '{"city": "Oslo"}')]
    assert len({c.id for c in response.tool_calls}) == 2 and all(c.id for c in response.tool_calls)
    assert response.text == "Checking."
    assert response.stop_reason == "tool_use"


async def test_malformed_tool_arguments_are_returned_raw_not_raised(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(tool_calls=[("get_time", '{"tz": UTC')]))

    _, response = await collect(provider, ask(tools=(GET_TIME,)))

    assert response.tool_calls[0].arguments == '{"tz": UTC'


async def test_usage_records_input_output_and_cache_counters_without_double_counting(
        provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(text="hi", usage=dict(input=12, output=7, cache_read=300, cache_write=40)))

    _, response = await collect(provider, ask())

    assert response.usage == Usage(input_tokens=12, output_tokens=7, cache_read_tokens=300, cache_write_tokens=40)
    assert response.usage.total == 359


# -- what goes over the wire -----------------------------------------------------------------------------


def _conversation() -> tuple[Message, ...]:
    return (
        Message("user", "Time in UTC and Oslo weather?"),
        Message("assistant", "Let me check.", tool_calls=(ToolCall("t1", "get_time", '{"tz": "UTC"}'),
                                                          ToolCall("t2", "get_weather", '{"city": "Oslo"}'))),
        Message("tool", "12:00", tool_call_id="t1", tool_name="get_time"),
        Message("tool", "service down", tool_call_id="t2", tool_name="get_weather", is_error=True),
    )


async def test_anthropic_request_caches_system_last_tool_and_last_message_block(fake_llm: FakeLLM) -> None:
    provider = make("anthropic", fake_llm)
    request = ModelRequest(system="You are Hermes.", messages=_conversation(), tools=(GET_TIME, GET_WEATHER))

    await collect(provider, request)

    body = fake_llm.requests[0].body
    assert body["system"] == [{"type": "text", "text": "You are Hermes.", "cache_control": {"type": "ephemeral"}}]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][0]["input_schema"] == GET_TIME.parameters
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert str(body).count("cache_control") == 3  # the API allows four breakpoints
    await provider.aclose()


async def test_anthropic_merges_consecutive_tool_results_into_one_user_message(fake_llm: FakeLLM) -> None:
    provider = make("anthropic", fake_llm)

    await collect(provider, ModelRequest(system="s", messages=_conversation(), tools=(GET_TIME, GET_WEATHER)))

    messages = fake_llm.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "t1", "name": "get_time", "input": {"tz": "UTC"}},
        {"type": "tool_use", "id": "t2", "name": "get_weather", "input": {"city": "Oslo"}},
    ]
    first, second = messages[2]["content"]
    assert first == {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "12:00"}]}
    assert second["tool_use_id"] == "t2" and second["is_error"] is True
    await provider.aclose()


async def test_images_are_sent_as_image_blocks_and_data_uris(fake_llm: FakeLLM) -> None:
    image = ImagePart("image/png", "iVBORw0KGgo=")
    request = ModelRequest(system="s", messages=(Message("user", "What is this?", images=(image,)),))
    for api in ("anthropic", "openai"):
        provider = make(api, fake_llm)
        await collect(provider, request)
        await provider.aclose()

    anthropic_content = fake_llm.requests[0].body["messages"][0]["content"]
    assert anthropic_content[1]["type"] == "image"
    assert anthropic_content[1]["source"] == {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    openai_content = fake_llm.requests[1].body["messages"][1]["content"]
    assert openai_content == [{"type": "text", "text": "What is this?"},
                              {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]


async def test_openai_request_puts_system_first_and_links_tool_results_by_id(fake_llm: FakeLLM) -> None:
    provider = make("openai", fake_llm)

    await collect(provider, ModelRequest(system="You are Hermes.", messages=_conversation(), tools=(GET_TIME,)))

    body = fake_llm.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 4096
    assert body["tools"][0] == {"type": "function", "function": {
        "name": "get_time", "description": GET_TIME.description, "parameters": GET_TIME.parameters}}
    system, user, assistant, result_1, result_2 = body["messages"]
    assert system == {"role": "system", "content": "You are Hermes."}
    assert user == {"role": "user", "content": "Time in UTC and Oslo weather?"}
    assert [c["id"] for c in assistant["tool_calls"]] == ["t1", "t2"]
    assert assistant["tool_calls"][0]["function"] == {"name": "get_time", "arguments": '{"tz": "UTC"}'}
    assert result_1 == {"role": "tool", "tool_call_id": "t1", "content": "12:00"}
    assert result_2["tool_call_id"] == "t2" and result_2["content"].startswith("Error")
    await provider.aclose()


async def test_lone_surrogates_in_history_reach_the_wire_as_replacement_characters(
        provider: Provider, fake_llm: FakeLLM) -> None:
    """One bad character (stored before input was sanitised, or from a tool) must not fail every later turn."""
    history = (
        Message("user", "broken \ud83d emoji"),
        Message("assistant", "Checking \udc00.", tool_calls=(ToolCall("t1", "get_time", '{"tz": "\\ud83d"}'),)),
        Message("tool", "output \udfff here", tool_call_id="t1", tool_name="get_time"),
        Message("user", "and now? 🚀"),
    )
    fake_llm.script(Reply(text="fine"))

    _, response = await collect(provider, ModelRequest(system="You are \ud800 Hermes.", messages=history,
                                                       tools=(GET_TIME,)))

    assert response.text == "fine"
    sent = fake_llm.requests[0]
    wire = str(sent.body)
    assert "broken \ufffd emoji" in wire and "Checking \ufffd." in wire and "output \ufffd here" in wire
    assert sent.system == "You are \ufffd Hermes." and sent.last_user_text == "and now? 🚀"
    if sent.api == "anthropic":  # tool input is sent parsed: the escaped half pair is replaced too
        assert sent.messages[1]["content"][1]["input"] == {"tz": "\ufffd"}


async def test_temperature_reaches_the_wire_only_when_set(provider: Provider, fake_llm: FakeLLM) -> None:
    await collect(provider, ask(temperature=0.2))
    await collect(provider, ask())

    assert fake_llm.requests[0].body["temperature"] == 0.2
    assert "temperature" not in fake_llm.requests[1].body


# -- failures --------------------------------------------------------------------------------------------


async def test_rate_limit_with_retry_after_is_retried_by_the_sdk_then_succeeds(api: str, fake_llm: FakeLLM) -> None:
    provider = make(api, fake_llm, max_retries=2)
    fake_llm.script(Reply(error=429, retry_after=1), Reply(text="second time lucky"))

    _, response = await collect(provider, ask())

    assert response.text == "second time lucky"
    assert len(fake_llm.requests) == 2
    # The server's one second, not the SDK's own first backoff (at most half a second).
    assert fake_llm.requests[1].received - fake_llm.requests[0].received >= 0.95
    await provider.aclose()


async def test_persistent_server_error_becomes_provider_error_with_status_500(api: str, fake_llm: FakeLLM) -> None:
    provider = make(api, fake_llm, max_retries=1)
    fake_llm.responder = lambda request: Reply(error=500, retry_after=0)

    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())

    assert caught.value.status == 500
    assert caught.value.fallback_eligible
    assert caught.value.provider == provider.spec
    assert len(fake_llm.requests) == 2  # the first try and one SDK retry
    await provider.aclose()


async def test_bad_request_is_a_provider_error_that_does_not_trigger_fallback(api: str, fake_llm: FakeLLM) -> None:
    provider = make(api, fake_llm, max_retries=2)
    fake_llm.script(Reply(error=400, error_message="messages: bad shape"))

    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())

    assert caught.value.status == 400
    assert not caught.value.fallback_eligible
    assert "messages: bad shape" in str(caught.value)
    assert len(fake_llm.requests) == 1
    await provider.aclose()


async def test_cut_stream_yields_what_arrived_then_raises_provider_error(provider: Provider,
                                                                         fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(text="Hello there, world", disconnect_after_chars=8))
    deltas: list[str] = []

    with pytest.raises(ProviderError) as caught:
        async for event in provider.stream(ask()):
            assert isinstance(event, TextDelta)
            deltas.append(event.text)

    assert "".join(deltas) == "Hello th"
    assert caught.value.status is None and caught.value.fallback_eligible
    assert isinstance(caught.value, StreamBroken)  # the response had begun: no SDK retries that


async def test_refused_connection_is_a_provider_error(api: str, fake_llm: FakeLLM) -> None:
    await fake_llm.stop()  # nothing listens on that port any more
    provider = make(api, fake_llm)

    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())

    assert caught.value.status is None and caught.value.fallback_eligible
    assert not isinstance(caught.value, StreamBroken)  # the SDK's own retries already had their go
    await provider.aclose()


async def test_anthropic_stream_cut_after_message_stop_is_a_complete_answer(fake_llm: FakeLLM) -> None:
    provider = make("anthropic", fake_llm)
    fake_llm.script(Reply(text="All of it", disconnect_after_chunks=99))  # every event sent, the body unfinished

    deltas, response = await collect(provider, ask())

    assert response.text == "".join(deltas) == "All of it" and response.stop_reason == "end_turn"
    await provider.aclose()


async def test_api_key_echoed_by_the_server_never_reaches_the_error_message(provider: Provider,
                                                                             fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(error=401, error_message=f"Incorrect API key provided: {API_KEY}"))

    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())

    assert caught.value.status == 401
    assert API_KEY not in str(caught.value)
    assert API_KEY[:12] not in str(caught.value)


async def test_other_secrets_in_error_text_are_redacted_too(provider: Provider, fake_llm: FakeLLM) -> None:
    token = "xoxb-123456789012-abcdefghijkl"
    fake_llm.script(Reply(error=400, error_message=f"bad request: header Authorization: Bearer {token}"))

    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())

    assert token not in str(caught.value) and "[REDACTED]" in str(caught.value)


# -- configuration ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "variable"), [("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
                                                ("openai:gpt-4.1", "OPENAI_API_KEY")])
def test_missing_api_key_is_a_config_error_naming_the_variable(spec: str, variable: str) -> None:
    with pytest.raises(ConfigError, match=f"^{variable} is not set"):
        make_provider(spec)


@pytest.mark.parametrize("spec", ["", "claude-sonnet", "anthropic:", ":gpt-4", "gemini:pro"])
def test_bad_model_spec_is_a_config_error(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_model_spec(spec)


def test_unknown_provider_is_one_sentence_listing_the_known_kinds() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_model_spec("gemini:pro")

    assert str(caught.value) == ("Model provider 'gemini' in 'gemini:pro' is unknown; use one of anthropic, openai, "
                                 "openai-compatible.")


def test_model_spec_splits_at_the_first_colon_only() -> None:
    assert parse_model_spec("anthropic:claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
    assert parse_model_spec(" openai-compatible:llama3:8b ") == ("openai-compatible", "llama3:8b")


async def test_sdk_base_url_env_vars_are_honoured_when_no_base_url_is_passed(
        api: str, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    if api == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_llm.anthropic_base_url)
        provider = make_provider("anthropic:claude-test", max_retries=0)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
        provider = make_provider("openai:gpt-test", max_retries=0)
    fake_llm.script(Reply(text="via env"))

    _, response = await collect(provider, ask())

    assert response.text == "via env"
    assert fake_llm.requests[0].api == api
    await provider.aclose()


async def test_openai_compatible_needs_no_key_and_sends_max_tokens(fake_llm: FakeLLM,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", fake_llm.openai_base_url)
    provider = make_provider("openai-compatible:llama3:8b", max_retries=0)

    _, response = await collect(provider, ask())

    sent = fake_llm.requests[0]
    assert provider.spec == response.model == "openai-compatible:llama3:8b"
    assert sent.model == "llama3:8b" and sent.body["max_tokens"] == 4096
    assert sent.headers["authorization"] == "Bearer not-needed"
    await provider.aclose()


def test_openai_compatible_without_any_base_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="OPENAI_COMPATIBLE_BASE_URL"):
        make_provider("openai-compatible:llama3")


async def test_abandoning_a_stream_midway_releases_it_cleanly(provider: Provider, fake_llm: FakeLLM) -> None:
    """An interrupted turn stops reading; the connection must be released, and the next call still works."""
    fake_llm.script(Reply(text="one two three four five", delay=0.01), Reply(text="next"))

    events = provider.stream(ask())
    async for event in events:
        if isinstance(event, TextDelta):
            break
    await events.aclose()  # type: ignore[attr-defined]
    _, response = await collect(provider, ask())

    assert response.text == "next"


async def test_error_event_inside_a_stream_becomes_provider_error_with_its_status(provider: Provider,
                                                                                 fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(text="Half an", stream_error=529, error_message="Overloaded"))
    deltas: list[str] = []

    with pytest.raises(ProviderError) as caught:
        async for event in provider.stream(ask()):
            assert isinstance(event, TextDelta)
            deltas.append(event.text)

    assert "".join(deltas) == "Half an"
    assert caught.value.status is not None and caught.value.status >= 500  # openai's kind has no 529
    assert caught.value.fallback_eligible and "Overloaded" in str(caught.value)
    assert isinstance(caught.value, StreamBroken)


# -- the registry: kinds come from entry points, load on use ---------------------------------------------

BUILTIN_KINDS = {"anthropic", "openai", "openai-compatible"}


def test_builtin_kinds_are_declared_as_entry_points() -> None:
    from importlib.metadata import entry_points

    declared = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert set(declared) >= BUILTIN_KINDS
    for name in BUILTIN_KINDS:
        kind = declared[name].load()
        assert isinstance(kind, ProviderKind) and kind.name == name


def test_specs_are_checked_without_importing_any_sdk() -> None:
    """Validating HERMES_MODEL and its key (start-up, doctor) costs no vendor SDK import."""
    code = ("import os, sys; os.environ['ANTHROPIC_API_KEY'] = 'k'; "
            "from hermes_engine.providers import check_provider, parse_model_spec; "
            "parse_model_spec('openai:gpt-4.1'); check_provider('anthropic:claude-sonnet-4-5'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic', 'openai')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


class _Echo:
    """A provider of a kind this project does not ship."""

    def __init__(self, spec: str, options: ProviderOptions) -> None:
        self.spec = spec
        self.options = options

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        text = request.messages[-1].content
        yield TextDelta(text)
        yield Completed(ModelResponse(text=text, model=self.spec))

    async def aclose(self) -> None:
        pass


def _echo_factory(model: str, options: ProviderOptions) -> Provider:
    return _Echo(f"echo:{model}", options)


@pytest.fixture
def echo_kind() -> Iterator[None]:
    register_provider("echo", _echo_factory, env=["ECHO_TOKEN"])
    yield
    REGISTRY.unregister("echo")


def test_a_registered_kind_is_listed_checked_and_built(echo_kind: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "echo" in known_providers()
    with pytest.raises(ConfigError, match="^ECHO_TOKEN is not set: export it or choose another model"):
        make_provider("echo:loud")

    monkeypatch.setenv("ECHO_TOKEN", "t")
    provider = make_provider("echo:loud", max_retries=7)

    assert provider.spec == "echo:loud" and isinstance(provider, Provider)
    assert isinstance(provider, _Echo) and provider.options.max_retries == 7
    with pytest.raises(ValueError, match="already registered"):
        register_provider("echo", _echo_factory)
    with pytest.raises(ValueError, match="already registered"):
        register_provider("anthropic", _echo_factory)


def _write_plugin(root: Path, module: str, body: str, entry_points: str) -> None:
    """An installed distribution as importlib.metadata sees it: a module and a dist-info with entry points."""
    (root / f"{module}.py").write_text(body)
    info = root / f"{module}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_points}\n")


def test_an_installed_package_adds_a_kind_by_entry_point_loaded_only_when_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_plugin(tmp_path, "hermes_echo_plugin", (
        "from hermes_engine.providers.registry import ProviderKind\n"
        "KIND = ProviderKind('echo', lambda model, options: None, env=['ECHO_BASE_URL'])\n"),
        "echo = hermes_echo_plugin:KIND\nbroken = hermes_no_such_module:KIND")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = ProviderRegistry()

    assert BUILTIN_KINDS | {"echo", "broken"} <= set(registry.names())
    assert registry.parse("echo:llama3") == ("echo", "llama3")
    assert "hermes_echo_plugin" not in sys.modules  # listed and validated by name alone

    with pytest.raises(ConfigError, match="^ECHO_BASE_URL is not set"):
        registry.check("echo:llama3")
    assert "hermes_echo_plugin" in sys.modules
    with pytest.raises(ConfigError, match="^Model provider 'broken' .* could not be loaded"):
        registry.build("broken:x")
    sys.modules.pop("hermes_echo_plugin", None)

