"""Anthropic Messages API provider.

Prompt caching is the point of most of the translation here: the system prompt and tool schemas are the
same on every call of a session, so they carry `cache_control` and are billed at the cache-read rate after
the first call; the last block of the newest message carries one too, so the whole conversation so far
becomes the cached prefix of the next call. That is three of the four breakpoints the API allows.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import anthropic
import httpx2

from hermes_engine.errors import ProviderError
from hermes_engine.ports.conversation import Message, ToolCall, Usage
from hermes_engine.ports.models import Completed, ModelRequest, ModelResponse, StreamBroken, StreamEvent, TextDelta
from hermes_engine.ports.tools import ToolSchema
from hermes_engine.providers.continuation import with_continuations
from hermes_engine.providers.output_limits import output_limit
from hermes_engine.providers.transport import encodable, encodable_request, provider_error, retry_after_seconds
from hermes_engine.providers.vision import for_model

_CACHE = {"type": "ephemeral"}

# A stream can carry an `error` event after a 200; the SDK then raises a status error with status 200.
# Its error type tells what really happened, so the chain can still decide about fallback.
_ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class AnthropicProvider:
    """Streams one Messages API call. Retries (429/5xx/connection, honouring `retry-after`) are the SDK's.

    `base_url` is handed to the SDK only when given, so `ANTHROPIC_BASE_URL` keeps working otherwise. The
    SDK's calls go through its aiohttp transport (`DefaultAioHttpClient`; proxies from the environment as
    before): httpx's own transport and its anyio layers cost about twice the CPU per call, the largest part
    of a turn's.
    """

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 max_retries: int = 3, timeout: float = 600.0, images: bool = True) -> None:
        self.model = model
        self.images = images  # the model takes images; else they are described in text only
        self.spec = f"anthropic:{model}"
        self._api_key = api_key
        options: dict[str, Any] = {"max_retries": max_retries, "timeout": timeout}
        if base_url is not None:
            options["base_url"] = base_url
        self._client = anthropic.AsyncAnthropic(api_key=api_key, http_client=anthropic.DefaultAioHttpClient(),
                                                **options)

    async def aclose(self) -> None:
        await self._client.close()

    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API arguments for `request` (without `stream`). Public so tests and logs can see them."""
        request = encodable_request(request)
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": output_limit(self.spec, request.max_tokens),
            "messages": to_anthropic_messages(for_model(with_continuations(request.messages), self.images)),
        }
        if request.system:
            params["system"] = [{"type": "text", "text": request.system, "cache_control": _CACHE}]
        if request.tools:
            params["tools"] = to_anthropic_tools(request.tools)
        if request.temperature is not None:
            params["temperature"] = request.temperature
        return params

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        params = self.build_params(request)
        state = _StreamState()
        began = False
        try:
            # The SDK's documented raw request: the params are already plain JSON, so the typed request
            # transform and per-event model construction are skipped (they grow with the history and
            # dominate the engine's own time); retries, auth and SSE handling stay the SDK's.
            events = await self._client.post("/v1/messages", body={**params, "stream": True}, cast_to=object,
                                             stream=True, stream_cls=anthropic.AsyncStream[object])
            began = True
            async with events:
                async for event in events:
                    text = state.feed(event if isinstance(event, dict) else {})
                    if text:
                        yield TextDelta(text)
        except (anthropic.AnthropicError, httpx2.HTTPError, httpx2.StreamError, json.JSONDecodeError) as err:
            if not state.stopped:  # a cut after message_stop loses nothing of the answer
                raise self._provider_error(err, broken=began) from None
        if not state.stopped:
            raise StreamBroken(f"{self.spec} failed (incomplete stream): it ended before message_stop",
                               provider=self.spec)
        yield Completed(state.response(self.spec))

    def _provider_error(self, err: BaseException, *, broken: bool) -> ProviderError:
        """One `ProviderError` for every SDK and transport failure, with the API key scrubbed from the text;
        a `StreamBroken` when the response had begun."""
        status: int | None = None
        retry_after: float | None = None
        detail = str(err)
        if isinstance(err, anthropic.APIStatusError):
            status = err.status_code
            detail = err.api_message or err.message
            if status < 400:
                status = _ERROR_TYPE_STATUS.get(err.type or "", 500)
            retry_after = retry_after_seconds(err.response.headers)
        elif isinstance(err, anthropic.APIResponseValidationError):
            status = err.status_code
        elif isinstance(err, anthropic.APIConnectionError) and err.__cause__ is not None:
            detail = f"{err.message} ({err.__cause__})"
        return provider_error(self.spec, err, detail, status=status, retry_after=retry_after, api_key=self._api_key,
                              broken=broken)


class _StreamState:
    """Accumulates raw stream events into the final response; tool input JSON is kept as raw text."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.tools: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.stop_reason = ""
        self.stopped = False

    def feed(self, event: dict[str, Any]) -> str:
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                text = str(delta.get("text") or "")
                self.text.append(text)
                return text
            if delta.get("type") == "input_json_delta" and event.get("index") in self.tools:
                self.tools[event["index"]]["parts"].append(delta.get("partial_json", ""))
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            index = event.get("index")
            if block.get("type") == "tool_use" and isinstance(index, int):
                self.tools[index] = {"id": block.get("id", ""), "name": block.get("name", ""),
                                     "parts": [], "input": block.get("input")}
        elif kind == "message_start":
            self._take_usage((event.get("message") or {}).get("usage") or {})
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            if event.get("usage"):
                self._take_usage(event["usage"])
        elif kind == "message_stop":
            self.stopped = True
        return ""

    def _take_usage(self, usage: dict[str, Any]) -> None:
        # Counters are cumulative; message_delta may repeat or omit the input-side ones.
        for source, field in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
                              ("cache_read_input_tokens", "cache_read_tokens"),
                              ("cache_creation_input_tokens", "cache_write_tokens")):
            if usage.get(source) is not None:
                setattr(self.usage, field, usage[source])

    def response(self, spec: str) -> ModelResponse:
        calls = []
        for index in sorted(self.tools):
            tool = self.tools[index]
            arguments = "".join(tool["parts"])
            if not tool["parts"]:
                arguments = json.dumps(tool["input"]) if tool["input"] else "{}"
            calls.append(ToolCall(id=tool["id"], name=tool["name"], arguments=arguments))
        self.usage.model = spec  # what the counts are priced by
        return ModelResponse(text="".join(self.text), tool_calls=calls, usage=self.usage,
                             stop_reason=self.stop_reason, model=spec)


# -- translation ----------------------------------------------------------------------------------------


def to_anthropic_tools(tools: tuple[ToolSchema, ...]) -> list[dict[str, Any]]:
    wire = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]
    if wire:
        wire[-1]["cache_control"] = _CACHE
    return wire


def to_anthropic_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Neutral history → alternating user/assistant messages of content blocks.

    Tool results become `tool_result` blocks in a user message; neighbours of the same role are merged
    (consecutive tool results into one message, as the API requires all results of one assistant turn
    together). The newest message's last block gets `cache_control`.
    """
    wire: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    if wire:
        wire[-1]["content"][-1] = {**wire[-1]["content"][-1], "cache_control": _CACHE}
    return wire


def _blocks(message: Message) -> list[dict[str, Any]]:
    images = [_image(i) for i in message.images]
    if message.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id or ""}
        content = ([{"type": "text", "text": message.content}] if message.content else []) + images
        if content:
            result["content"] = content
        if message.is_error:
            result["is_error"] = True
        return [result]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    if message.role == "assistant":
        blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)}
                   for c in message.tool_calls]
        return blocks
    blocks += images
    # The API rejects an empty user turn; an image-less, text-less message still has to keep its place.
    return blocks or [{"type": "text", "text": "(empty message)"}]


def _image(image: Any) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": image.media_type, "data": image.data_b64}}


def _tool_input(arguments: str) -> dict[str, Any]:
    """The API wants an object; malformed arguments were already reported back through the tool result."""
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        return {}
    return encodable(parsed) if isinstance(parsed, dict) else {}
