"""From a `provider:model` spec (HERMES_MODEL, HERMES_FALLBACK_MODELS) to a ready provider.

Keys come from the environment and are checked here, at start-up, so a missing key is one clear sentence
instead of an authentication error on the first message. Base URLs are left to the SDKs, which read
`OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` themselves when no `base_url` is passed.
"""

from __future__ import annotations

import os
from typing import Sequence

from hermes_engine.errors import ConfigError
from hermes_engine.providers.base import Provider
from hermes_engine.providers.chain import ProviderChain

KNOWN_PROVIDERS = ("anthropic", "openai", "openai-compatible")

# Local servers ignore the key, but the OpenAI SDK refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"


def parse_model_spec(spec: str) -> tuple[str, str]:
    """"anthropic:claude-sonnet-4-5" → ("anthropic", "claude-sonnet-4-5"). The model part may hold colons
    (Ollama tags such as "openai-compatible:llama3:8b")."""
    provider, sep, model = (spec or "").strip().partition(":")
    provider, model = provider.strip().lower(), model.strip()
    if not sep or not provider or not model:
        raise ConfigError(f"Model {spec!r} is not of the form provider:model "
                          "(for example anthropic:claude-sonnet-4-5); fix HERMES_MODEL or HERMES_FALLBACK_MODELS.")
    if provider not in KNOWN_PROVIDERS:
        raise ConfigError(f"Model provider {provider!r} in {spec!r} is unknown; use one of "
                          f"{', '.join(KNOWN_PROVIDERS)}.")
    return provider, model


def parse_model_list(text: str | None) -> list[str]:
    """HERMES_FALLBACK_MODELS: comma-separated specs; blanks ignored, each one validated."""
    specs = [s.strip() for s in (text or "").split(",") if s.strip()]
    for spec in specs:
        parse_model_spec(spec)
    return specs


def make_provider(spec: str, *, max_retries: int = 3, timeout: float = 600.0) -> Provider:
    """Build the provider for `spec`, reading its key (and, for openai-compatible, its URL) from the env."""
    provider, model = parse_model_spec(spec)
    if provider == "anthropic":
        from hermes_engine.providers.anthropic_provider import AnthropicProvider

        # Passed explicitly: without it the SDK goes hunting for profile files and federation settings.
        return AnthropicProvider(model, api_key=_required_env("ANTHROPIC_API_KEY"), max_retries=max_retries,
                                 timeout=timeout)

    from hermes_engine.providers.openai_provider import OpenAIProvider

    if provider == "openai":
        return OpenAIProvider(model, api_key=_required_env("OPENAI_API_KEY"), max_retries=max_retries,
                              timeout=timeout)
    base_url = _env("OPENAI_COMPATIBLE_BASE_URL")
    if base_url is None and _env("OPENAI_BASE_URL") is None:
        raise ConfigError("OPENAI_COMPATIBLE_BASE_URL is not set: point it at your server's /v1 URL "
                          "(for example http://127.0.0.1:8000/v1) to use an openai-compatible model.")
    api_key = _env("OPENAI_COMPATIBLE_API_KEY") or _env("OPENAI_API_KEY") or PLACEHOLDER_API_KEY
    # base_url None → the SDK reads OPENAI_BASE_URL itself.
    return OpenAIProvider(model, api_key=api_key, base_url=base_url, max_retries=max_retries,
                          spec_prefix="openai-compatible", timeout=timeout)


def make_chain(primary: str, fallbacks: Sequence[str] = (), *, max_retries: int = 3) -> ProviderChain:
    """The primary model and its fallbacks; every key is checked before any provider is used."""
    return ProviderChain([make_provider(spec, max_retries=max_retries) for spec in (primary, *fallbacks)])


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def _required_env(name: str) -> str:
    value = _env(name)
    if value is None:
        raise ConfigError(f"{name} is not set: export it or choose another model with HERMES_MODEL.")
    return value
