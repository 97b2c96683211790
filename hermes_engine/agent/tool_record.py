"""What is kept about each tool call: its arguments and result as the session holds them, the record beside
the result, and the per-session summary `/status` shows.

A tool runs with the arguments the model wrote, but the session keeps them, and the tool's result, with
secrets redacted (`redact` from `hermes_engine.policy.secrets`, the one used for exports and logs). The
redacted copies are the history itself, not only what is stored: the next model request is built from the
same messages the store holds, so a session reloaded after eviction or a restart sends the same bytes as
the one that stayed in memory (the provider's cached prefix stays valid) and a key a tool saw is never sent
back to the provider in later requests. The price: where a result holds something shaped like a secret (a
long hex digest, a token), the model reads `[REDACTED]` in every request that carries the result.

The record rides in the tool result message's `meta` (stored with the session, never sent to a model):
the call's redacted arguments, the size in characters of the result the tool returned (before redaction)
and how long the tool took.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from hermes_engine.policy.secrets import redact
from hermes_engine.ports.conversation import Message, ToolCall

META_KEY = "tool_call"


def redacted_calls(calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    """The calls as the session keeps them: same ids and names, arguments redacted."""
    return tuple(ToolCall(call.id, call.name, redacted_arguments(call.arguments)) for call in calls)


def redacted_arguments(arguments: str) -> str:
    """`arguments` with secrets redacted, still JSON where they were. Redacting the text finds a secret by
    the key that names it (`"api_key": "…"`); where that leaves invalid JSON (a match across a quote), each
    string inside is redacted instead, so a provider that wants the arguments parsed still gets them."""
    clean = redact(arguments)
    if clean == arguments or _parses(clean) or not _parses(arguments):
        return clean
    return json.dumps(_redact_strings(json.loads(arguments)), ensure_ascii=False)


def redacted_result(content: str) -> str:
    """A tool's result as the session keeps it."""
    return redact(content)


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _redact_strings(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_strings(v) for v in value]
    if isinstance(value, dict):
        return {redact(k): _redact_strings(v) for k, v in value.items()}
    return value


def record(call: ToolCall, result_chars: int, seconds: float) -> dict[str, Any]:
    return {META_KEY: {"arguments": redacted_arguments(call.arguments), "result_chars": result_chars,
                       "duration_ms": round(seconds * 1000)}}


def summary(messages: Iterable[Message]) -> str:
    """"Tools this session: 7 calls — web_fetch ×3, calculate ×4" (most used first), or "no calls"."""
    counts = Counter(m.tool_name for m in messages if m.role == "tool" and META_KEY in m.meta and m.tool_name)
    total = sum(counts.values())
    if not total:
        return "Tools this session: no calls"
    parts = ", ".join(f"{name} ×{n}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"Tools this session: {total} call{'s' if total != 1 else ''} — {parts}"
