"""Model providers: the contract (`base`), the kinds a spec may name (`registry`, with the built-ins in
`builtin`), one module per wire format, and fallback (`chain`, whose `build_chain` turns specs into a chain).

The SDK-backed classes load lazily, so code that only needs the contract (every `import ...providers.base`
runs this file first) does not pay for importing the vendor SDKs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes_engine.ports.models import (
    Completed,
    EventStream,
    ModelRequest,
    ModelResponse,
    Provider,
    StreamEvent,
    TextDelta,
)
from hermes_engine.ports.tools import ToolSchema
from hermes_engine.providers.chain import ProviderChain, TurnRouter, build_chain
from hermes_engine.providers.registry import (
    EnvVar,
    ProviderKind,
    ProviderOptions,
    check_provider,
    known_providers,
    make_provider,
    parse_model_list,
    parse_model_spec,
    register_provider,
)

if TYPE_CHECKING:
    from hermes_engine.providers.anthropic_provider import AnthropicProvider
    from hermes_engine.providers.openai_provider import OpenAIProvider

__all__ = [
    "AnthropicProvider",
    "Completed",
    "EnvVar",
    "EventStream",
    "ModelRequest",
    "ModelResponse",
    "OpenAIProvider",
    "Provider",
    "ProviderChain",
    "ProviderKind",
    "ProviderOptions",
    "StreamEvent",
    "TextDelta",
    "ToolSchema",
    "TurnRouter",
    "build_chain",
    "check_provider",
    "known_providers",
    "make_provider",
    "parse_model_list",
    "parse_model_spec",
    "register_provider",
]


def __getattr__(name: str) -> Any:
    if name == "AnthropicProvider":
        from hermes_engine.providers.anthropic_provider import AnthropicProvider

        return AnthropicProvider
    if name == "OpenAIProvider":
        from hermes_engine.providers.openai_provider import OpenAIProvider

        return OpenAIProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
