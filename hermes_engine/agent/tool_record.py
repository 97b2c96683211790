"""What is kept about each tool call: its arguments and result as the session holds them, the record beside
the result, and the per-session summary `/status` shows.

The store keeps tool-call arguments and results with secrets redacted (`redact` from
`hermes_engine.secrets`, the one used for exports and logs), so no key a tool saw or was given rests
in the database, its backups or an export. The live history keeps what the model wrote and what the tool
returned: a checksum, a commit id or a token the model just read (all shaped like secrets) stays usable for
the rest of the turn and the session. A session reloaded after eviction or a restart is built from the
stored copy, so there the model reads `[REDACTED]` in older results, and the first request after the
reload misses the provider's cached prefix once where something was redacted.

The record rides in the tool result message's `meta` (stored with the session, never sent to a model):
the call's redacted arguments, the size in characters of the result the tool returned (before redaction)
and how long the tool took.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from hermes_engine.ports.conversation import Message, ToolCall
from hermes_engine.secrets import redact

META_KEY = "tool_call"


def as_kept(message: Message) -> Message:
    """`message` as the store keeps it: tool-call arguments and tool results redacted."""
    if message.role == "tool":
        content = redact(message.content)
        return message if content == message.content else replace(message, content=content)
    if message.tool_calls:
        calls = tuple(ToolCall(c.id, c.name, redacted_arguments(c.arguments)) for c in message.tool_calls)
        return message if calls == message.tool_calls else replace(message, tool_calls=calls)
    return message


def redacted_arguments(arguments: str) -> str:
    """`arguments` with secrets redacted, still JSON where they were. Redacting the text finds a secret by
    the key that names it (`"api_key": "…"`); where that leaves invalid JSON (a match across a quote), each
    string inside is redacted instead, so a provider that wants the arguments parsed still gets them."""
    clean = redact(arguments)
    if clean == arguments or _parses(clean) or not _parses(arguments):
        return clean
    return json.dumps(_redact_strings(json.loads(arguments)), ensure_ascii=False)


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
