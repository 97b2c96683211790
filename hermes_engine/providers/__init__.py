"""Model providers: the contract (`base`), one module per wire format, fallback (`chain`), and `factory`.

The SDK-backed classes load lazily, so code that only needs the contract (every `import ...providers.base`
runs this file first) does not pay for importing both vendor SDKs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes_engine.providers.base import (
    Completed,
    ModelRequest,
    ModelResponse,
    Provider,
    StreamEvent,
    TextDelta,
    ToolSchema,
)
from hermes_engine.providers.chain import ProviderChain, TurnRouter
from hermes_engine.providers.factory import make_chain, make_provider, parse_model_list, parse_model_spec

if TYPE_CHECKING:
    from hermes_engine.providers.anthropic_provider import AnthropicProvider
    from hermes_engine.providers.openai_provider import OpenAIProvider

__all__ = [
    "AnthropicProvider",
    "Completed",
    "ModelRequest",
    "ModelResponse",
    "OpenAIProvider",
    "Provider",
    "ProviderChain",
    "StreamEvent",
    "TextDelta",
    "ToolSchema",
    "TurnRouter",
    "make_chain",
    "make_provider",
    "parse_model_list",
    "parse_model_spec",
]


def __getattr__(name: str) -> Any:
    if name == "AnthropicProvider":
        from hermes_engine.providers.anthropic_provider import AnthropicProvider

        return AnthropicProvider
    if name == "OpenAIProvider":
        from hermes_engine.providers.openai_provider import OpenAIProvider

        return OpenAIProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
