"""The provider kinds this project ships, registered through its `hermes_gateway.providers` entry points
(pyproject.toml). Loading this module imports no vendor SDK: each factory imports its provider class, and
with it the SDK, when a provider of that kind is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_engine.providers.registry import EnvVar, ProviderKind, ProviderOptions, read_env

if TYPE_CHECKING:
    from hermes_engine.providers.anthropic_provider import AnthropicProvider
    from hermes_engine.providers.openai_provider import OpenAIProvider

# Local servers ignore the key, but the OpenAI SDK refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"


def _anthropic(model: str, options: ProviderOptions) -> AnthropicProvider:
    from hermes_engine.providers.anthropic_provider import AnthropicProvider

    # Passed explicitly: without it the SDK goes hunting for profile files and federation settings.
    return AnthropicProvider(model, api_key=read_env("ANTHROPIC_API_KEY"), max_retries=options.max_retries,
                             timeout=options.timeout, images=options.images)


def _openai(model: str, options: ProviderOptions) -> OpenAIProvider:
    from hermes_engine.providers.openai_provider import OpenAIProvider

    return OpenAIProvider(model, api_key=read_env("OPENAI_API_KEY"), max_retries=options.max_retries,
                          timeout=options.timeout, images=options.images)


def _openai_compatible(model: str, options: ProviderOptions) -> OpenAIProvider:
    from hermes_engine.providers.openai_provider import OpenAIProvider

    api_key = read_env("OPENAI_COMPATIBLE_API_KEY") or read_env("OPENAI_API_KEY") or PLACEHOLDER_API_KEY
    # base_url None (only OPENAI_BASE_URL is set) → the SDK reads OPENAI_BASE_URL itself.
    return OpenAIProvider(model, api_key=api_key, base_url=read_env("OPENAI_COMPATIBLE_BASE_URL"),
                          max_retries=options.max_retries, spec_prefix="openai-compatible", timeout=options.timeout,
                          images=options.images)


ANTHROPIC = ProviderKind("anthropic", _anthropic, env=(EnvVar("ANTHROPIC_API_KEY"),),
                         description="Anthropic Messages API")
OPENAI = ProviderKind("openai", _openai, env=(EnvVar("OPENAI_API_KEY"),),
                      description="OpenAI Chat Completions API")
OPENAI_COMPATIBLE = ProviderKind(
    "openai-compatible", _openai_compatible,
    env=(EnvVar("OPENAI_COMPATIBLE_BASE_URL", alternatives=("OPENAI_BASE_URL",),
                hint="point it at your server's /v1 URL (for example http://127.0.0.1:8000/v1) to use an "
                     "openai-compatible model"),),
    description="any server speaking Chat Completions (vLLM, llama.cpp, Ollama, proxies); the key is optional")
