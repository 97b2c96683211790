"""How big a model's context window is, and how many tokens a request takes.

Window: `HERMES_CONTEXT_WINDOW` overrides everything, then the bot profile's `context_window`, then the
built-in table below (longest matching prefix of the model name), then `DEFAULT_CONTEXT_WINDOW`.

Tokens: no tokenizer ships offline (tiktoken downloads its tables at run time), so a request is
measured as the provider reported it — the last call's input + cache tokens — plus a chars/4 estimate of
whatever was appended since (`TokenMeter`). With no report to build on (first call, or the history was
rewritten by compression) the whole request is estimated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hermes_engine.ports.conversation import Message, Usage, estimate_tokens
from hermes_engine.ports.tools import ToolSchema
from hermes_engine.providers.model_names import longest_prefix

# Conservative: an unknown model is often a small local one behind an OpenAI-compatible server, and
# compressing a little early is cheaper than a request the server refuses.
DEFAULT_CONTEXT_WINDOW = 32_768

# Model-name prefix → context window (tokens). Matched on the name without the provider and without an
# organisation path ("meta-llama/Llama-3.1-8B" → "llama-3.1-8b"); the longest prefix wins.
KNOWN_WINDOWS: dict[str, int] = {
    # Anthropic
    "claude-": 200_000,
    "claude-2": 100_000,
    "claude-instant": 100_000,
    # OpenAI
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-1106": 128_000,
    "gpt-4-0125": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "chatgpt-4o": 128_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # open models (as served by vLLM, llama.cpp, Ollama ...)
    "llama-4": 1_048_576,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "llama3.1": 131_072,
    "llama3.2": 131_072,
    "llama3.3": 131_072,
    "llama-3": 8_192,
    "llama3": 8_192,
    "llama-2": 4_096,
    "llama2": 4_096,
    "mistral-large": 131_072,
    "mistral-small": 32_768,
    "mixtral": 32_768,
    "qwen2.5": 32_768,
    "qwen3": 32_768,
    "deepseek": 65_536,
    "gemma-3": 131_072,
    "gemma3": 131_072,
    "gemini-1.5": 1_048_576,
    "gemini-2": 1_048_576,
}

MESSAGE_OVERHEAD_TOKENS = 4  # role and framing per message
IMAGE_TOKENS = 1_600  # a typical image at the providers' default resolution


def known_window(spec: str) -> int | None:
    """The built-in table's window for a model spec, or None when the model is not in it."""
    return longest_prefix(KNOWN_WINDOWS, spec)


def context_window(spec: str, *, profile_window: int | None = None, env_window: int | None = None) -> int:
    """The context window for `spec`: environment, then profile, then the table, then the default."""
    for value in (env_window, profile_window):
        if value:
            return int(value)
    return known_window(spec) or DEFAULT_CONTEXT_WINDOW


def window_for(spec: str, profile: Any, settings: Any) -> int:
    """`context_window` with the overrides read from a `BotProfile` and `Settings`."""
    return context_window(spec, profile_window=getattr(profile, "context_window", None),
                          env_window=getattr(settings, "context_window", None))


# --------------------------------------------------------------------------------------------- estimates

def message_tokens(message: Message) -> int:
    """chars/4 of everything a provider sends for this message, plus a little framing."""
    chars = len(message.content)
    for call in message.tool_calls:
        chars += len(call.name) + len(call.arguments) + len(call.id)
    if message.tool_call_id:
        chars += len(message.tool_call_id)
    return (chars + 3) // 4 + MESSAGE_OVERHEAD_TOKENS + IMAGE_TOKENS * len(message.images)


def messages_tokens(messages: Sequence[Message]) -> int:
    return sum(message_tokens(m) for m in messages)


def fixed_tokens(system: str, tools: Sequence[ToolSchema]) -> int:
    """The part of every request that does not change during a session: system prompt and tool schemas."""
    schemas = json.dumps([{"name": t.name, "description": t.description, "parameters": t.parameters}
                          for t in tools], separators=(",", ":")) if tools else ""
    return estimate_tokens(system) + estimate_tokens(schemas)


def prompt_tokens(usage: Usage) -> int:
    """What the provider counted as the request: uncached input plus cache reads and writes."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


@dataclass
class _Report:
    history: int  # id() of the history view the count is for
    count: int  # messages the reported request held
    tokens: int  # the provider's count for that request
    generation: int


class TokenMeter:
    """The size of the next request of one session: the provider's count for the last request plus an
    estimate of the messages appended since. Any rewrite of the history (`touch`) invalidates the count.

    Estimates are calibrated: each provider count is compared with the chars/4 estimate of the same request,
    and later estimates are scaled by that ratio (within 0.5–2), so a rewritten history is measured on the
    provider's scale rather than a few percent under it."""

    def __init__(self) -> None:
        self.generation = 0
        self.ratio = 1.0
        self._report: _Report | None = None

    def touch(self) -> None:
        """The history has a new view (pruned, summarised, truncated)."""
        self.generation += 1
        self._report = None

    def observe(self, history: Sequence[Message], count: int, usage: Usage, estimated: int | None = None) -> None:
        """A request of the first `count` messages of `history` was counted as `usage` by the provider
        (`estimated`: the chars/4 estimate of that same request, for calibration)."""
        tokens = prompt_tokens(usage)
        if tokens > 0:
            self._report = _Report(id(history), count, tokens, self.generation)
            if estimated:
                self.ratio = min(2.0, max(0.5, tokens / estimated))

    def scaled(self, tokens: int) -> int:
        return int(tokens * self.ratio)

    def measure(self, history: Sequence[Message], fixed: int,
                estimate: Callable[[Sequence[Message]], int] = messages_tokens) -> tuple[int, bool]:
        """(tokens of a request of `history` now, whether a provider count was the base of it). `fixed` is
        the system prompt and tool schemas; `estimate` sizes messages that were not counted."""
        r = self._report
        if (r is not None and r.history == id(history) and r.generation == self.generation
                and len(history) >= r.count):
            return r.tokens + self.scaled(estimate(history[r.count:])), True
        return self.scaled(fixed + estimate(history)), False
