"""The provider contract: one Protocol, implemented per wire format.

A provider streams one model call. Retries with backoff happen inside (the official SDKs honour
`retry-after`); what escapes is a `ProviderError`, and the `ProviderChain` decides about fallback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Protocol, runtime_checkable

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


@runtime_checkable
class Provider(Protocol):
    """One model behind one wire format. `spec` is "provider:model"."""

    spec: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Yield text deltas as they arrive, then exactly one `Completed`. Raise `ProviderError`."""
        ...

    async def aclose(self) -> None: ...
