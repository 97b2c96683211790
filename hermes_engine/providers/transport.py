"""What both SDK-backed providers need around the wire: the wait the server asked for, a request that
can always be encoded, and one shape for what went wrong."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, TypeVar

from hermes_engine.errors import ProviderError
from hermes_engine.ports.conversation import Message, ToolCall
from hermes_engine.ports.inbound import encodable_text
from hermes_engine.ports.models import ModelRequest, StreamBroken
from hermes_engine.secrets import redact

T = TypeVar("T")



def retry_after_seconds(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after`, whichever the server sent."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return float(value) / scale
            except ValueError:
                continue
    return None


def provider_error(spec: str, err: BaseException, detail: str, *, status: int | None, retry_after: float | None,
                   api_key: str | None, broken: bool) -> ProviderError:
    """`<spec> failed (HTTP <status> | <error type>): <detail>`, whatever the SDK: the fallback chain and the
    person read the same sentence for every provider. The API key is scrubbed from the text (an SDK may echo
    a request's headers), and a response that had begun gives a `StreamBroken`, which is not retried."""
    if isinstance(err, json.JSONDecodeError):
        detail = "malformed event stream"
    kind = f"HTTP {status}" if status is not None else type(err).__name__
    message = f"{spec} failed ({kind}): {redact(detail, extra=(api_key,))}"
    error = StreamBroken if broken else ProviderError
    return error(message, status=status, provider=spec, retry_after=retry_after)


def encodable(value: T) -> T:
    """`value` (text, or JSON made of dicts and lists) with every string made `encodable_text`.

    A Python string can hold half of a surrogate pair (text stored before input was sanitised, a tool's
    output, a `\\ud83d` escape in JSON the model wrote); UTF-8 cannot, so the SDK would fail to encode the
    request, and since history is sent again every turn, so would every later turn of that chat. What needs
    no change is returned as it is.
    """
    if isinstance(value, str):
        return encodable_text(value)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {encodable(k): encodable(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [encodable(v) for v in value]  # type: ignore[return-value]
    return value


def encodable_request(request: ModelRequest) -> ModelRequest:
    """`request` with every text that reaches the wire made `encodable`; the request itself when all was.

    Both providers build their parameters from this, so one bad character costs one replacement character
    instead of the chat. (Tool arguments the Anthropic wire needs parsed pass `encodable` once more there.)
    """
    system = encodable(request.system)
    messages = tuple(_encodable_message(m) for m in request.messages)
    if system is request.system and all(a is b for a, b in zip(messages, request.messages, strict=True)):
        return request
    return replace(request, system=system, messages=messages)


def _encodable_message(message: Message) -> Message:
    texts = (message.content, message.tool_call_id, message.tool_name,
             *(text for call in message.tool_calls for text in (call.id, call.name, call.arguments)))
    if all(text is None or encodable(text) is text for text in texts):
        return message
    calls = tuple(ToolCall(encodable(c.id), encodable(c.name), encodable(c.arguments)) for c in message.tool_calls)
    return replace(message, content=encodable(message.content), tool_calls=calls,
                   tool_call_id=encodable(message.tool_call_id), tool_name=encodable(message.tool_name))
