"""The provider contract: one Protocol, implemented per wire format.

A provider streams one model call. Retries with backoff happen inside (the official SDKs honour
`retry-after`); what escapes is a `ProviderError`, and the `ProviderChain` decides about fallback.
Which providers exist is the registry's business (`hermes_engine.providers.registry`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from hermes_engine.ports.conversation import Message, ToolCall, Usage


@dataclass(frozen=True)
class ToolSchema:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema object


@dataclass(frozen=True)
class ModelRequest:
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSchema, ...] = ()
    max_tokens: int = 4096
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


StreamEvent = TextDelta | Completed


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
