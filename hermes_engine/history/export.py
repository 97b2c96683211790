"""Trajectories: every stored conversation as JSONL, for evaluation and fine-tuning.

One line per session, in the OpenAI chat format:

    {"session_id": 12, "bot": "mybot", "platform": "telegram", "created_at": "2025-03-01T10:00:00+00:00",
     "models": ["anthropic:claude-sonnet-4-5"],
     "messages": [{"role": "system", "content": "..."},
                  {"role": "user", "content": "..."},
                  {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                                                      "function": {"name": "calculate", "arguments": "{...}"}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "42"},
                  {"role": "assistant", "content": "It is 42."}],
     "usage": {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0},
     "compactions": [{"id": 3, "first_message_id": 5, "last_message_id": 40, "summary": "...", ...}]}

The messages are the stored ones — all of them, whatever compression did to the live context; the
summaries come along under "compactions". Secrets and tokens are redacted everywhere (`redact` from
`hermes_engine.secrets`: the shapes the security scan refuses). Session keys (which hold platform chat
and user ids) are left out. With `person_id`, sessions that person took part in are exported, and what other
people said in them is replaced by a placeholder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from hermes_engine.ports.conversation import Message
from hermes_engine.ports.storage import Store, StoredMessage
from hermes_engine.secrets import REDACTED, redact

__all__ = ["OTHER_PERSON", "REDACTED", "ExportStats", "export_trajectories", "openai_message", "parse_since", "redact",
           "trajectory"]

OTHER_PERSON = "[message from another participant omitted]"


def openai_message(message: Message) -> dict[str, Any]:
    """One stored message in the OpenAI chat format (redacted)."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": redact(message.content)}
    out: dict[str, Any] = {"role": message.role, "content": redact(message.content)}
    if message.role == "assistant" and message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.name, "arguments": redact(c.arguments)}}
                             for c in message.tool_calls]
    return out


@dataclass
class ExportStats:
    sessions: int = 0
    messages: int = 0


def parse_since(text: str | None) -> datetime | None:
    """"2025-03-01" or an ISO date-time → an aware UTC datetime (a date means its midnight UTC)."""
    if not text:
        return None
    value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def trajectory(session: Any, stored: list[StoredMessage], compactions: list[Any], *,
               person_id: int | None = None) -> dict[str, Any]:
    """One session as an export record."""
    messages: list[dict[str, Any]] = []
    system = (session.state or {}).get("system_prompt")
    if system:
        messages.append({"role": "system", "content": redact(system)})
    totals = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0}
    models: list[str] = []
    for item in stored:
        entry = openai_message(item.message)
        if person_id is not None and item.message.role == "user" and item.person_id not in (None, person_id):
            entry["content"] = OTHER_PERSON
        messages.append(entry)
        if item.usage is not None:
            for key in totals:
                totals[key] += getattr(item.usage, key)
        if item.model and item.model not in models:
            models.append(item.model)
    return {
        "session_id": session.id,
        "bot": session.bot,
        "platform": session.key.split(":", 1)[0],
        "created_at": session.created_at.isoformat(),
        "parent_session_id": session.parent_id,
        "models": models,
        "messages": messages,
        "usage": totals,
        "compactions": [{"id": c.id, "parent_id": c.parent_id, "first_message_id": c.first_message_id,
                         "last_message_id": c.last_message_id, "summary": redact(c.summary),
                         "tokens_before": c.tokens_before, "tokens_after": c.tokens_after,
                         "created_at": c.created_at.isoformat()} for c in compactions],
    }


async def export_trajectories(store: Store, out: TextIO, *, since: datetime | None = None,
                              person_id: int | None = None) -> ExportStats:
    """Write one JSON line per session with a message at or after `since` (and, with `person_id`, in which
    that person took part)."""
    stats = ExportStats()
    for session_id in await store.export_session_ids(since=since, person_id=person_id):
        session = await store.get_session(session_id)
        if session is None:
            continue
        stored = await store.load_stored_messages(session_id)
        compactions = await store.list_compactions([session_id])
        record = trajectory(session, stored, compactions, person_id=person_id)
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        stats.sessions += 1
        stats.messages += len(stored)
    return stats
