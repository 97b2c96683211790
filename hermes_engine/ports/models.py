"""The model contracts: what one model call sends and streams back, the `Provider` each wire format
implements, and the chain of models a turn or a feature calls through.

A provider streams one model call. Retries of a failed request happen inside (the official SDKs back
off and honour `retry-after`); what escapes is a `ProviderError`. A stream that breaks after the response
began is a `StreamBroken`, which no SDK retries: the chain's router asks again, then falls back, and tells
its reader with `Restart` to drop the text it had passed on (`hermes_engine.providers.chain`).
Which providers exist is the registry's business (`hermes_engine.providers.registry`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from hermes_engine.errors import ProviderError
from hermes_engine.ports.conversation import Message, ToolCall, Usage
from hermes_engine.ports.history import SessionHistory
from hermes_engine.ports.tools import ToolSchema


@dataclass(frozen=True)
class ModelRequest:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...] = ()
    max_tokens: int | None = None  # at most this many output tokens; None: the model's maximum (`output_limits`)
    temperature: float | None = None
    purpose: str = "turn"  # "turn" | "judge" | "review" | "summary": lets fakes and logs tell calls apart


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass
class ModelResponse:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = ""
    model: str = ""  # "provider:model" that actually answered


@dataclass(frozen=True)
class Completed:
    response: ModelResponse


@dataclass(frozen=True)
class Restart:
    """Drop the text deltas of this call received so far: the call starts again (its stream broke) and
    the deltas that follow make up the whole answer. Only the router yields it, never a provider."""


StreamEvent = TextDelta | Completed | Restart


class StreamBroken(ProviderError):
    """The response began but its stream ended before the answer was complete: a cut connection, an error
    event inside the stream, a stream without its end marker. Asking again may well succeed."""


class EventStream(Protocol):
    """What `Provider.stream` returns: the events of one call, closable before its end.

    A caller that stops reading early (an interrupted turn, a fallback decision) calls `aclose()` so the
    provider releases its connection now rather than whenever the garbage collector gets to it. An
    `async def stream(...)` that yields is one (Python's async generators have `aclose`).
    """

    def __aiter__(self) -> AsyncIterator[StreamEvent]: ...

    def __anext__(self) -> Awaitable[StreamEvent]: ...

    def aclose(self) -> Awaitable[None]: ...


@runtime_checkable
class Provider(Protocol):
    """One model behind one wire format. `spec` is "provider:model"."""

    @property
    def spec(self) -> str: ...  # read-only here, so a plain attribute and a property both satisfy it

    def stream(self, request: ModelRequest) -> EventStream:
        """Yield text deltas as they arrive, then exactly one `Completed`. Raise `ProviderError`."""
        ...

    async def aclose(self) -> None: ...


class Router(Protocol):
    """One turn's view of the model chain: it remembers which model serves the turn and falls back."""

    def stream(self, request: ModelRequest) -> EventStream: ...


class ModelChain(Protocol):
    """The primary model and its fallbacks (`Host.chain`): a feature calls `route()` once per turn."""

    def route(self) -> Router: ...


class CallHook(Protocol):
    """Around each model call of a turn (compression): may give the model a different view of the
    history, says how much room the context window leaves the answer, and learns what the call cost."""

    async def before_call(self, history: SessionHistory, router: Router) -> Sequence[Message]:
        """The messages to send now; a shorter view it made of `history` is handed to `history` first."""
        ...

    def output_room(self) -> int | None:
        """Output tokens the window leaves beside the request `before_call` just prepared (None: no bound)."""
        ...

    def after_call(self, request: ModelRequest, response: ModelResponse) -> None: ...
