"""Model names as the built-in tables know them, and the lookup every such table uses.

A spec names its provider ("openai-compatible:meta-llama/Llama-3.1-8B"); the tables of context windows
(`hermes_engine.agent.context_window`) and output limits (`output_limits`) are keyed by the bare model
name, so one entry serves a model however it is reached (a proxy, an organisation path, a dated version).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")

_PROVIDERS = ("anthropic", "openai", "openai-compatible")


def model_name(spec: str) -> str:
    """"openai-compatible:meta-llama/Llama-3.1-8B" → "llama-3.1-8b" (a bare model name works too)."""
    provider, sep, rest = spec.strip().partition(":")
    name = rest if sep and provider.lower() in _PROVIDERS else spec
    return name.rsplit("/", 1)[-1].strip().lower()


def longest_prefix(table: Mapping[str, T], spec: str) -> T | None:
    """The value of the longest key of `table` that starts the model name of `spec`, or None."""
    name = model_name(spec)
    best: tuple[str, T] | None = None
    for prefix, value in table.items():
        if name.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, value)
    return best[1] if best else None
