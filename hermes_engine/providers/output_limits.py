"""How many tokens a model may write in one response: the `max_tokens` every request carries.

A request asks for the model's own maximum (the table below: longest matching prefix of the model name,
as for context windows), or for less where its caller says so (`ModelRequest.max_tokens`: a bot profile's
`max_output_tokens`, a judge's short verdict). A limit asked of a model in the table never goes past its
maximum, which the API would refuse; an unknown model gets what was asked, else `DEFAULT_OUTPUT_LIMIT`.
Each provider applies this to its own model, so a fallback to a smaller model is sent its own maximum.

An answer that reaches the limit is not lost: the agent loop asks the model to go on
(`hermes_engine.agent.long_answers`).
"""

from __future__ import annotations

from hermes_engine.providers.model_names import longest_prefix

# Conservative: an unknown model is often a small local one behind an OpenAI-compatible server, which
# refuses a request whose prompt and max_tokens together exceed its context (vLLM, llama.cpp).
DEFAULT_OUTPUT_LIMIT = 4_096

# Model-name prefix → maximum output tokens per response, as the vendors publish them. Where a family
# varies, its bare prefix holds the smallest figure of the family, so a model not listed is never asked
# for more than it takes.
KNOWN_OUTPUT_LIMITS: dict[str, int] = {
    # Anthropic — docs.anthropic.com/en/docs/about-claude/models/overview (the models and legacy models
    # tables, "Max output") and platform.claude.com/docs/en/about-claude/models/whats-new-claude-4-6.
    "claude-": 4_096,
    "claude-3-haiku": 4_096,
    "claude-3-sonnet": 4_096,
    "claude-3-opus": 4_096,
    "claude-3-5-haiku": 8_192,
    "claude-3-5-sonnet": 8_192,
    "claude-3-7-sonnet": 64_000,  # 128K only with the output-128k beta header, which is not sent
    "claude-opus-4": 32_000,  # claude-opus-4-20250514, claude-opus-4-0, claude-opus-4-1
    "claude-opus-4-5": 64_000,
    "claude-opus-4-6": 128_000,
    "claude-sonnet-4": 64_000,  # claude-sonnet-4-20250514, claude-sonnet-4-0, 4-5, 4-6
    "claude-haiku-4-5": 64_000,
    # OpenAI — platform.openai.com/docs/models/<model> ("Max output tokens").
    "gpt-3.5-turbo": 4_096,
    "gpt-4": 8_192,
    "gpt-4-turbo": 4_096,
    "gpt-4-1106": 4_096,
    "gpt-4-0125": 4_096,
    "gpt-4o": 16_384,
    "gpt-4o-2024-05-13": 4_096,
    "chatgpt-4o": 16_384,
    "gpt-4.1": 32_768,  # also gpt-4.1-mini and gpt-4.1-nano
    "gpt-5": 128_000,  # also gpt-5-mini, gpt-5-nano, gpt-5.1
    "gpt-5-chat": 16_384,
    "gpt-5.1-chat": 16_384,
    "o1": 100_000,
    "o1-mini": 65_536,
    "o1-preview": 32_768,
    "o3": 100_000,  # also o3-mini
    "o4-mini": 100_000,
}


def known_output_limit(spec: str) -> int | None:
    """The table's maximum output for a model spec, or None when the model is not in it."""
    return longest_prefix(KNOWN_OUTPUT_LIMITS, spec)


def output_limit(spec: str, requested: int | None = None) -> int:
    """The `max_tokens` to send `spec` for a request that asked for `requested` (None: the most it takes)."""
    maximum = known_output_limit(spec)
    if requested is None:
        return maximum or DEFAULT_OUTPUT_LIMIT
    return min(requested, maximum) if maximum else requested
