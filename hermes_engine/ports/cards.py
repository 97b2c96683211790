"""The kanban board's storage role and records (`CardStore`), owned by the engine; `storage/repos/kanban.py`
implements it. Kept beside `storage.py`, which re-exports them as part of `Store`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from hermes_engine.ports.inbound import ChatKind, ReplyTarget

CardStatus = Literal["triage", "todo", "ready", "running", "blocked", "done", "archived"]
CARD_STATUSES: tuple[CardStatus, ...] = ("triage", "todo", "ready", "running", "blocked", "done", "archived")


@dataclass(frozen=True)
class CardSpec:
    """A card to create. `depends_on` names cards by id (int, existing cards) or by the `key` of another
    spec in the same batch (str), so a task split into cards can wire its parts together in one call."""

    title: str
    body: str = ""
    profile: str = "default"
    depends_on: tuple[int | str, ...] = ()
    key: str | None = None
    parent_id: int | None = None
    goal_mode: bool = False
    status: CardStatus = "todo"
    origin: dict[str, Any] = field(default_factory=dict)  # where progress goes (a ReplyTarget as a dict)
    owner_id: int | None = None  # the person who made it (None: the operator, or a card older than owners)
    shared_in: str | None = None  # the group, channel or thread it was made in (`shared_conversation`)


def shared_conversation(target: ReplyTarget, kind: ChatKind | str) -> str | None:
    """The key of the shared conversation a message was written in, or None for a DM, which no one else reads.

    A group, channel or thread is one conversation with its chat: everyone who can write in a chat can read
    its threads (Slack threads, Telegram topics, Discord threads), so a card made in any thread of a chat is
    the chat's, seen from the chat and from each of its threads."""
    if ChatKind(kind) is ChatKind.DM:
        return None
    return f"{target.platform}:{target.account}:{target.chat_id}"


@dataclass(frozen=True)
class CardViewer:
    """Who looks at the board from chat, and where. In a DM a person sees the cards they made, wherever they
    made them; in a group, channel or thread (`conversation`, from `shared_conversation`) everyone writing there
    sees the cards made there, and only those: what the bot answers there, the whole conversation reads, so a
    person's DM cards stay out of it. An admin of the bot sees every card. The dispatcher and the operator's
    command line pass no viewer at all and see everything."""

    person_id: int | None
    conversation: str | None = None
    admin: bool = False


@dataclass(frozen=True)
class CardRecord:
    """A kanban card. `claim` is who runs it now ("holder#attempt"), with `lease_expires_at`; `failures`
    counts consecutive failed attempts (the circuit breaker blocks a card at the limit)."""

    id: int
    title: str
    body: str
    status: CardStatus
    profile: str
    depends_on: tuple[int, ...]
    parent_id: int | None
    goal_mode: bool
    origin: dict[str, Any]
    result: str | None
    reason: str | None  # why it is blocked (or was last moved)
    attempts: int
    failures: int
    claim: str | None
    lease_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    spent: CardUsage = field(default_factory=lambda: CardUsage())  # by all its attempts
    owner_id: int | None = None
    shared_in: str | None = None

    @property
    def person_id(self) -> int | None:
        """The person who asked for the card (their usage limits pay for it); None from the command line."""
        person = self.origin.get("person")
        return person if isinstance(person, int) else None


@dataclass(frozen=True)
class CardUsage:
    """What workers spent on a card: tokens sent (input and cache) and received, and model calls."""

    tokens_in: int = 0
    tokens_out: int = 0
    model_calls: int = 0

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def describe(self) -> str:
        return f"{self.tokens_in:,} tokens in, {self.tokens_out:,} out, {self.model_calls} model calls"


@dataclass(frozen=True)
class CardEvent:
    """One line of a card's history: who moved it, when, why; an attempt's end carries its handoff."""

    id: int
    card_id: int
    actor: str
    kind: str  # "created" | "moved" | "claimed" | "heartbeat" | "completed" | "failed" | "reclaimed" | ...
    from_status: str | None
    to_status: str | None
    reason: str
    handoff: dict[str, Any]
    created_at: datetime


class CardStore(Protocol):
    """The kanban board: cards, their dependencies, claims with leases, and each card's history."""

    async def create_cards(self, specs: Sequence[CardSpec], *, actor: str) -> list[CardRecord]:
        """Create the cards in one transaction. ValueError (nothing created) for an unknown dependency, a
        key used twice, or dependencies that form a cycle."""

    async def get_card(self, card_id: int, *, viewer: CardViewer | None = None) -> CardRecord | None:
        """The card, or None when it does not exist or `viewer` may not see it (the two look the same)."""

    async def list_cards(self, *, profile: str | None = None, status: CardStatus | None = None,
                         parent_id: int | None = None, viewer: CardViewer | None = None) -> list[CardRecord]:
        """Cards, oldest first; archived ones only when asked for by status; only those `viewer` may see."""

    async def add_dependency(self, card_id: int, depends_on: int, *, actor: str) -> None:
        """ValueError when either card is unknown or the new edge would close a cycle."""

    async def move_card(self, card_id: int, status: CardStatus, *, actor: str, reason: str = "",
                        viewer: CardViewer | None = None) -> CardRecord | None:
        """Set a card's status by hand (a person, the CLI); a claim on it is dropped. None (nothing changes):
        an unknown card, or one `viewer` may not see."""

    async def promote_ready(self, profile: str) -> list[int]:
        """Move `todo` cards whose dependencies are all done to `ready`; their ids."""

    async def claim_cards(self, profile: str, holder: str, *, lease_seconds: float, max_running: int,
                          limit: int | None = None) -> list[CardRecord]:
        """Claim ready cards of `profile`, oldest first, while fewer than `max_running` run. Atomic: two
        claimers never get the same card (SKIP LOCKED on PostgreSQL, a conditional update under the write
        lock on SQLite)."""

    async def heartbeat_card(self, card_id: int, claim: str, *, lease_seconds: float, note: str = "") -> bool:
        """Renew the lease of a running card; False when `claim` no longer holds it."""

    async def finish_attempt(self, card_id: int, claim: str, *, ok: bool, result: str = "",
                             handoff: dict[str, Any] | None = None, max_failures: int = 2,
                             to_status: CardStatus | None = None) -> CardRecord | None:
        """End the attempt `claim` holds: done (ok), or back to ready — blocked, with the error as reason,
        at `max_failures` consecutive failures. None (nothing changes) when `claim` no longer holds the
        card, so an attempt finishes a card at most once."""

    async def release_card(self, card_id: int, claim: str, *, reason: str) -> bool:
        """Give a running card back (ready, its failure count untouched): the attempt was stopped, not
        failed, e.g. by a shutdown. False when `claim` no longer holds it."""

    async def reclaim_stale(self, profile: str, *, max_failures: int = 2) -> list[CardRecord]:
        """Running cards whose lease expired, or whose claim names a process found gone
        (`hermes_engine.holders.holder_gone`): their attempt fails like `finish_attempt`."""

    async def split_card(self, card_id: int, claim: str, children: Sequence[CardSpec], *, result: str,
                         handoff: dict[str, Any]) -> tuple[CardRecord, list[CardRecord]] | None:
        """End the attempt `claim` holds by splitting the card, in one transaction: create `children` under
        it and send the card back to `todo`, waiting for them (they become its dependencies), so its worker
        runs again with their results once all are done. None (nothing created) when the claim is lost."""

    async def block_waiting_parents(self, profile: str, *, actor: str) -> list[CardRecord]:
        """Block the cards waiting for a child card that is blocked, with the child's reason."""

    async def record_card_usage(self, card_id: int, attempt: int, usage: CardUsage, *, actor: str) -> None:
        """Add one attempt's spending to the card's totals, with an event saying what that attempt spent."""

    async def card_events(self, card_id: int) -> list[CardEvent]:
        """The card's history, oldest first."""
