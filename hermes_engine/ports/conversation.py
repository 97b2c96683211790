"""The provider-neutral conversation record: what is stored, and what providers translate to wire format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model made it. `arguments` stays the raw JSON text, so malformed arguments can
    be reported back to the model verbatim instead of being lost in parsing."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ImagePart:
    media_type: str
    data_b64: str


@dataclass(frozen=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # for role == "tool"
    tool_name: str | None = None  # for role == "tool"
    is_error: bool = False  # for role == "tool": the tool raised
    images: tuple[ImagePart, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "content": self.content,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls],
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "is_error": self.is_error,
            "images": [{"media_type": i.media_type, "data_b64": i.data_b64} for i in self.images],
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            tool_calls=tuple(ToolCall(**c) for c in data.get("tool_calls") or ()),
            tool_call_id=data.get("tool_call_id"),
            tool_name=data.get("tool_name"),
            is_error=bool(data.get("is_error")),
            images=tuple(ImagePart(**i) for i in data.get("images") or ()),
            meta=dict(data.get("meta") or {}),
        )


@dataclass
class Usage:
    """Tokens of model calls, the four counters disjoint. A provider's response names its model (`model`);
    a sum keeps each model's share apart (`by_model`), since models are priced apart."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    model: str = field(default="", compare=False, kw_only=True)  # "provider:model" of one response's counts
    by_model: dict[str, Usage] = field(default_factory=dict, compare=False, repr=False, kw_only=True)

    def add(self, other: Usage) -> None:
        if self.model and not self.by_model and self.total:
            self.by_model[self.model] = self._counts()
        self._add_counts(other)
        for name, part in other.per_model().items():
            self.by_model.setdefault(name, Usage(model=name))._add_counts(part)

    def per_model(self) -> dict[str, Usage]:
        """Each model's counts; empty when no response named its model."""
        if self.by_model:
            return self.by_model
        return {self.model: self._counts()} if self.model else {}

    def _counts(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_write_tokens,
                     model=self.model)

    def _add_counts(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens


def estimate_tokens(text: str) -> int:
    """Rough token estimate (chars/4). Provider-reported usage is trusted wherever it exists."""
    return (len(text) + 3) // 4
