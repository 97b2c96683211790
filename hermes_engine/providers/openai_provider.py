"""OpenAI Chat Completions provider, also used for OpenAI-compatible servers (vLLM, llama.cpp, Ollama, proxies).

Chat Completions is the one wire format nearly every compatible server speaks, which is why this provider
uses it rather than the newer Responses API.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx2
import openai

from hermes_engine.errors import ConfigError, ProviderError
from hermes_engine.ports.conversation import Message, ToolCall, Usage
from hermes_engine.ports.models import Completed, ModelRequest, ModelResponse, StreamBroken, StreamEvent, TextDelta
from hermes_engine.ports.tools import ToolSchema
from hermes_engine.providers.continuation import with_continuations
from hermes_engine.providers.output_limits import output_limit
from hermes_engine.providers.transport import encodable_request, provider_error, retry_after_seconds
from hermes_engine.providers.vision import for_model

# Finish reasons in the Anthropic vocabulary, so the rest of the engine sees one set of words.
_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens"}

# An error event inside a 200 stream has no status; its code or type says what happened, so the chain can
# still decide about fallback.
_ERROR_KIND_STATUS = {"invalid_request_error": 400, "rate_limit_exceeded": 429, "rate_limit_error": 429,
                      "server_error": 500, "overloaded_error": 529}


class OpenAIProvider:
    """Streams one Chat Completions call. Retries (429/5xx/connection, honouring `retry-after`) are the SDK's.

    Usage accounting: OpenAI counts cache reads (`prompt_tokens_details.cached_tokens`) and cache writes
    (`cache_write_tokens`) inside `prompt_tokens`. `Usage` keeps its four counters disjoint, as Anthropic
    reports them, so `input_tokens` is `prompt_tokens` minus both and `Usage.total` never counts a token
    twice. `stop_reason` is normalised to end_turn / tool_use / max_tokens (others pass through).

    `spec_prefix="openai-compatible"` makes the same class serve local servers: it then sends `max_tokens`
    (which they all accept) instead of OpenAI's newer `max_completion_tokens`. `base_url` is handed to the SDK
    only when given, so `OPENAI_BASE_URL` keeps working otherwise. The SDK's calls go through its aiohttp
    transport (`DefaultAioHttpClient`), as in `AnthropicProvider`.
    """

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 max_retries: int = 3, spec_prefix: str = "openai", timeout: float = 600.0,
                 images: bool = True) -> None:
        self.model = model
        self.images = images  # the model takes images; else they are described in text only
        self.spec = f"{spec_prefix}:{model}"
        self._api_key = api_key
        self._max_tokens_field = "max_completion_tokens" if spec_prefix == "openai" else "max_tokens"
        options: dict[str, Any] = {"max_retries": max_retries, "timeout": timeout}
        if base_url is not None:
            options["base_url"] = base_url
        try:
            self._client = openai.AsyncOpenAI(api_key=api_key, http_client=openai.DefaultAioHttpClient(), **options)
        except openai.OpenAIError as err:  # the SDK refuses to start without a key
            raise ConfigError("OPENAI_API_KEY is not set: export it or choose another model with HERMES_MODEL.") \
                from err

    async def aclose(self) -> None:
        await self._client.close()

    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The Chat Completions arguments for `request`. Public so tests and logs can see them."""
        request = encodable_request(request)
        params: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request.system,
                                           for_model(with_continuations(request.messages), self.images)),
            self._max_tokens_field: output_limit(self.spec, request.max_tokens),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            params["tools"] = to_openai_tools(request.tools)
        if request.temperature is not None:
            params["temperature"] = request.temperature
        return params

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        params = self.build_params(request)
        state = _StreamState()
        began = False
        try:
            # The SDK's documented raw request: the params are already plain JSON, and skipping the typed
            # request transform and per-chunk model construction takes ~12 ms off every call on a long
            # history (retries, auth and SSE handling stay the SDK's).
            chunks = await self._client.post("/chat/completions", body=params, cast_to=object, stream=True,
                                             stream_cls=openai.AsyncStream[object])
            began = True
            async with chunks:
                async for chunk in chunks:
                    text = state.feed(chunk if isinstance(chunk, dict) else {})
                    if text:
                        yield TextDelta(text)
        except (openai.OpenAIError, httpx2.HTTPError, httpx2.StreamError, json.JSONDecodeError) as err:
            if state.finish_reason is None:  # a cut after the finish reason loses nothing of the answer
                raise self._provider_error(err, broken=began) from None
        if state.finish_reason is None:
            raise StreamBroken(f"{self.spec} failed (incomplete stream): it ended without a finish_reason",
                               provider=self.spec)
        yield Completed(state.response(self.spec))

    def _provider_error(self, err: BaseException, *, broken: bool) -> ProviderError:
        """One `ProviderError` for every SDK and transport failure, with the API key scrubbed from the text;
        a `StreamBroken` when the response had begun.

        A cut stream arrives wrapped (`APIConnectionError`), a refused connection too; both have no status.
        """
        status: int | None = None
        retry_after: float | None = None
        detail = str(err)
        if isinstance(err, openai.APIStatusError):
            status = err.status_code
            detail = _body_message(err.body) or err.message
            retry_after = retry_after_seconds(err.response.headers)
        elif isinstance(err, openai.APIResponseValidationError):
            status = err.status_code
        elif isinstance(err, openai.APIConnectionError):
            detail = f"{err.message} ({err.__cause__})" if err.__cause__ is not None else err.message
        elif isinstance(err, openai.APIError):
            detail = _body_message(err.body) or err.message
            status = _error_kind_status(err.body)
        return provider_error(self.spec, err, detail, status=status, retry_after=retry_after, api_key=self._api_key,
                              broken=broken)


class _StreamState:
    """Accumulates chunks; tool-call fragments are joined per `index`, arguments kept as raw text."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.finish_reason: str | None = None

    def feed(self, chunk: dict[str, Any]) -> str:
        if chunk.get("usage"):
            self._take_usage(chunk["usage"])
        choices = chunk.get("choices")
        if not choices:
            return ""
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        delta = choice.get("delta")
        if not delta:
            return ""
        for fragment in delta.get("tool_calls") or ():
            self._take_call(fragment)
        text = delta.get("content") or ""
        if text:
            self.text.append(text)
        return text

    def _take_call(self, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        if index is None:  # some compatible servers omit it: a new id starts a new call
            index = len(self.calls) if fragment.get("id") or not self.calls else max(self.calls)
        call = self.calls.setdefault(index, {"id": "", "name": "", "parts": []})
        if fragment.get("id"):
            call["id"] = fragment["id"]
        function = fragment.get("function")
        if function:
            if function.get("name") and not call["name"]:
                call["name"] = function["name"]
            if function.get("arguments"):
                call["parts"].append(function["arguments"])

    def _take_usage(self, usage: dict[str, Any]) -> None:
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") or 0
        written = details.get("cache_write_tokens") or 0
        self.usage = Usage(input_tokens=max(0, (usage.get("prompt_tokens") or 0) - cached - written),
                           output_tokens=usage.get("completion_tokens") or 0,
                           cache_read_tokens=cached, cache_write_tokens=written)

    def response(self, spec: str) -> ModelResponse:
        calls = [ToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments="".join(c["parts"]))
                 for i, c in sorted(self.calls.items())]
        reason = self.finish_reason or ""
        self.usage.model = spec  # what the counts are priced by
        return ModelResponse(text="".join(self.text), tool_calls=calls, usage=self.usage,
                             stop_reason=_STOP_REASONS.get(reason, reason), model=spec)


# -- translation ----------------------------------------------------------------------------------------


def to_openai_tools(tools: tuple[ToolSchema, ...]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.parameters}} for t in tools]


def to_openai_messages(system: str, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Neutral history → chat messages, system first.

    Tool messages cannot carry images, and nothing may stand between an assistant's tool calls and their
    results, so images returned by tools follow the run of tool messages as one user message, each tool's
    images under a line naming the call they came from (so the model does not take them for the person's).
    """
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    tool_images: list[dict[str, Any]] = []
    for message in messages:
        if message.role != "tool" and tool_images:
            wire.append({"role": "user", "content": tool_images})
            tool_images = []
        if message.role == "user":
            wire.append({"role": "user", "content": _user_content(message)})
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                entry["tool_calls"] = [{"id": c.id, "type": "function",
                                        "function": {"name": c.name, "arguments": c.arguments}}
                                       for c in message.tool_calls]
            elif not message.content:
                entry["content"] = ""
            wire.append(entry)
        else:
            content = message.content or "(no output)"
            if message.is_error and not content.lower().startswith("error"):
                content = f"Error: {content}"
            wire.append({"role": "tool", "tool_call_id": message.tool_call_id or "", "content": content})
            if message.images:
                label = (f"[images returned by the tool call {message.tool_name or 'tool'} "
                         f"({message.tool_call_id or '?'}) above: tool output, not sent by the person]")
                tool_images += [{"type": "text", "text": label}, *(_image(i) for i in message.images)]
    if tool_images:
        wire.append({"role": "user", "content": tool_images})
    return wire


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    if not message.images:
        return message.content
    parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    return parts + [_image(i) for i in message.images]


def _image(image: Any) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{image.media_type};base64,{image.data_b64}"}}


def _body_message(body: object) -> str:
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str):
            return message
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return ""


def _error_kind_status(body: object) -> int | None:
    if isinstance(body, dict):
        for key in ("code", "type"):
            status = _ERROR_KIND_STATUS.get(str(body.get(key)))
            if status is not None:
                return status
    return None
