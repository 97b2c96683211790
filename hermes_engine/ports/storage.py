"""The store contract the engine depends on. `storage.store.SqlStore` implements it for SQLite and PostgreSQL.

Records are plain dataclasses so nothing outside `storage/` touches an ORM session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from hermes_engine.ports.conversation import Message, Usage


@dataclass(frozen=True)
class PersonRecord:
    id: int
    display_name: str
    merged_into: int | None = None  # set when `link_accounts` merged this person into another


@dataclass(frozen=True)
class AccountRecord:
    id: int
    person_id: int
    platform: str
    account: str
    user_id: str
    display_name: str


@dataclass(frozen=True)
class SessionRecord:
    id: int
    key: str
    bot: str
    parent_id: int | None
    created_at: datetime
    model: str | None = None  # per-session model override (/model)
    state: dict[str, Any] = field(default_factory=dict)  # small per-session state (counters, settings)


@dataclass(frozen=True)
class StoredMessage:
    id: int
    session_id: int
    person_id: int | None
    message: Message
    usage: Usage | None
    model: str | None
    created_at: datetime


@dataclass(frozen=True)
class InboundEvent:
    platform: str
    event_id: str
    status: str  # "received" | "done"
    payload: dict[str, Any]
    created_at: datetime | None = None  # when it was first received


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


class Store(Protocol):
    async def init(self) -> None:
        """Apply migrations and open the pool. Idempotent."""

    async def close(self) -> None: ...

    # people and their platform accounts
    async def resolve_account(self, platform: str, account: str, user_id: str,
                              display_name: str = "") -> AccountRecord:
        """Get or create the account (and a new person for a first-seen account)."""

    async def link_accounts(self, keep_person_id: int, merge_person_id: int) -> None:
        """Move every account of `merge_person_id` onto `keep_person_id`."""

    async def get_person(self, person_id: int) -> PersonRecord | None: ...

    async def list_accounts(self, person_id: int) -> list[AccountRecord]: ...

    # sessions
    async def active_session(self, key: str, bot: str) -> SessionRecord:
        """The newest session for `key` (created on first use)."""

    async def new_session(self, key: str, bot: str, parent_id: int | None = None) -> SessionRecord:
        """Start a fresh session for `key`; later `active_session` calls return it."""

    async def get_session(self, session_id: int) -> SessionRecord | None: ...

    async def update_session(self, session_id: int, *, model: str | None = ...,  # type: ignore[assignment]
                             state: dict[str, Any] | None = None) -> None: ...

    # messages
    async def append_message(self, session_id: int, message: Message, *, person_id: int | None = None,
                             usage: Usage | None = None, model: str | None = None) -> int: ...

    async def load_messages(self, session_id: int) -> list[Message]: ...

    async def load_stored_messages(self, session_id: int) -> list[StoredMessage]:
        """Like `load_messages`, with ids, person, usage, model and time."""

    async def session_usage(self, session_id: int) -> Usage: ...

    # inbound de-duplication: a durable inbox
    async def record_inbound(self, platform: str, event_id: str, payload: dict[str, Any]) -> bool:
        """Insert a received event; False when it was seen before (a duplicate)."""

    async def complete_inbound(self, platform: str, event_id: str) -> None: ...

    async def pending_inbound(self, platform: str | None = None) -> list[InboundEvent]:
        """Events received but not answered (e.g. the process was killed mid-turn)."""

    async def prune_inbound(self, older_than: datetime) -> int:
        """Delete completed events received before `older_than`; returns how many."""

    # goals (/goal)
    async def create_goal(self, session_key: str, bot: str, text: str, *, session_id: int | None = None,
                          target: dict[str, Any] | None = None) -> GoalRecord:
        """Start an active goal; an open goal for the same key and bot is marked "cleared"."""

    async def get_goal(self, goal_id: int) -> GoalRecord | None: ...

    async def active_goal(self, session_key: str, bot: str) -> GoalRecord | None:
        """The open goal ("active" or "paused") for `session_key` and `bot`, if any."""

    async def update_goal(self, goal_id: int, *, status: GoalStatus | None = None, text: str | None = None,
                          session_id: int | None = None, turns_used: int | None = None,
                          tokens_used: int | None = None, add_turns: int = 0, add_tokens: int = 0,
                          verdict: dict[str, Any] | None = None,
                          verdicts: list[dict[str, Any]] | None = None,
                          target: dict[str, Any] | None = None) -> GoalRecord | None:
        """Change the given fields (None leaves one as it is); `add_*` increment, `verdict` appends."""

    async def list_goals(self, status: GoalStatus | None = None, *, bot: str | None = None,
                         session_key: str | None = None) -> list[GoalRecord]: ...

    # leases: single-replica scheduled jobs
    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        """Take or renew lease `name` for `ttl_seconds`; False while another holder's lease is live."""

    # /link codes
    async def create_link_code(self, code: str, person_id: int, ttl_seconds: float) -> None: ...

    async def redeem_link_code(self, code: str) -> int | None:
        """The person who made a live `code` (used up by this call), else None."""

    async def release_lease(self, name: str, holder: str) -> bool:
        """Give up lease `name` if `holder` holds it."""
