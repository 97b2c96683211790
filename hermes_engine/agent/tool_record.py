"""What is kept about each tool call beside its result, and the per-session summary `/status` shows.

The record rides in the tool result message's `meta` (stored with the session, never sent to a model):
the call's arguments with secrets redacted (the assistant message keeps the raw ones the model wrote,
which providers need back), the result's size in characters and how long the tool took.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from hermes_engine.policy.secrets import redact
from hermes_engine.ports.conversation import Message, ToolCall

META_KEY = "tool_call"


def record(call: ToolCall, result_chars: int, seconds: float) -> dict[str, Any]:
    return {META_KEY: {"arguments": redact(call.arguments), "result_chars": result_chars,
                       "duration_ms": round(seconds * 1000)}}


def summary(messages: Iterable[Message]) -> str:
    """"Tools this session: 7 calls — web_fetch ×3, calculate ×4" (most used first), or "no calls"."""
    counts = Counter(m.tool_name for m in messages if m.role == "tool" and META_KEY in m.meta and m.tool_name)
    total = sum(counts.values())
    if not total:
        return "Tools this session: no calls"
    parts = ", ".join(f"{name} ×{n}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"Tools this session: {total} call{'s' if total != 1 else ''} — {parts}"
