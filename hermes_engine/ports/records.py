"""Records of what conversations and goals left in the store, shared by the storage roles of `storage.py`
and the dashboard's reading of them (`conversations.py`), which `storage.py` brings into `Store`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from hermes_engine.ports.conversation import Message, Usage


@dataclass(frozen=True)
class StoredMessage:
    id: int
    session_id: int
    person_id: int | None
    message: Message
    usage: Usage | None
    model: str | None
    created_at: datetime


GoalStatus = Literal["active", "paused", "done", "blocked", "cleared"]


@dataclass(frozen=True)
class GoalRecord:
    """A /goal. "active" and "paused" are open; a session key + bot has at most one open goal."""

    id: int
    session_key: str
    bot: str
    session_id: int | None
    text: str
    status: GoalStatus
    turns_used: int
    tokens_used: int
    verdicts: list[dict[str, Any]]  # judge verdicts, oldest first
    target: dict[str, Any]  # where continuations go (platform, chat, thread ...), free-form
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SearchHit:
    kind: str  # "message" | "summary"
    id: int  # message id or compaction id
    session_id: int
    role: str  # "user" | "assistant" | "summary"
    snippet: str
    created_at: datetime
    score: float  # higher is better (comparable within one search)
