"""The storage roles the engine needs, owned by the engine; `storage/` implements them.

Each part of the engine asks for the narrowest role it uses (the scheduler a `LeaseStore`, search a
`SearchIndex`), so a new backend can be written role by role. `Store` is all of them together: what the
composition root opens and hands to the gateway. Records are plain frozen dataclasses, so nothing outside
`storage/` touches an ORM session or a database handle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from hermes_engine.ports.blobs import AttachmentBlobs
from hermes_engine.ports.cards import CARD_STATUSES as CARD_STATUSES
from hermes_engine.ports.cards import CardEvent as CardEvent
from hermes_engine.ports.cards import CardRecord as CardRecord
from hermes_engine.ports.cards import CardSpec as CardSpec
from hermes_engine.ports.cards import CardStatus as CardStatus
from hermes_engine.ports.cards import CardStore as CardStore
from hermes_engine.ports.cards import CardUsage as CardUsage
from hermes_engine.ports.cards import CardViewer as CardViewer
from hermes_engine.ports.cards import shared_conversation as shared_conversation
from hermes_engine.ports.conversation import Message, Usage
from hermes_engine.ports.conversations import ConversationBrowser
from hermes_engine.ports.dashboard import DashboardStore
from hermes_engine.ports.inbound import LastInbound
from hermes_engine.ports.jobs import ScheduledJobs
from hermes_engine.ports.records import GoalRecord as GoalRecord
from hermes_engine.ports.records import GoalStatus as GoalStatus
from hermes_engine.ports.records import SearchHit as SearchHit
from hermes_engine.ports.records import StoredMessage as StoredMessage
from hermes_engine.ports.reply import Delivery
from hermes_engine.ports.usage import ModelSpend as ModelSpend
from hermes_engine.ports.usage import UsageCount as UsageCount
from hermes_engine.ports.usage import UsageLedger as UsageLedger


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
class ForgottenPerson:
    """What `forget_person` deleted, with what the caller needs to remove the files kept beside the database
    (memory folders by person id, attachment folders by session key, attachment files by path)."""

    person_ids: tuple[int, ...]  # the person and everyone merged into them
    accounts: tuple[AccountRecord, ...]
    session_keys: tuple[str, ...]  # keys of the sessions deleted whole (conversations no one else wrote in)
    sessions: int
    messages: int  # in those sessions, plus the person's own messages in sessions shared with others
    inbound: int  # inbox rows holding their messages
    goals: int
    link_codes: int
    attachment_paths: tuple[str, ...]  # files their messages brought, as the inbox recorded them
    cards: int = 0  # kanban cards made for them: archived, their text and where they came from wiped
    jobs: int = 0  # reminders and scheduled tasks they made: deleted


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
class NewMessage:
    """A message to append, with what `append_message` takes beside it."""

    message: Message
    person_id: int | None = None
    usage: Usage | None = None
    model: str | None = None


@dataclass(frozen=True)
class InboundEvent:
    platform: str
    event_id: str
    status: str  # "received" | "done" | "rejected"
    payload: dict[str, Any]
    created_at: datetime | None = None  # when it was first received
    session_key: str | None = None  # the session it was recorded for; None if recorded without one


@dataclass(frozen=True)
class CompactionRecord:
    """One summary of a stretch of a session's stored messages (compression lineage)."""

    id: int
    session_id: int
    parent_id: int | None
    first_message_id: int  # first stored message the summary covers (inclusive)
    last_message_id: int  # last stored message it covers (inclusive)
    summary: str
    reason: str  # "agent" | "hygiene" | "command"
    tokens_before: int
    tokens_after: int
    created_at: datetime


@dataclass(frozen=True)
class MessageRef:
    """Enough of a stored message to line it up with the in-memory history."""

    id: int
    role: str
    content: str
    tool_call_id: str | None
    event_id: str | None


class PeopleStore(Protocol):
    """People and their platform accounts (one person, many accounts once linked)."""

    async def resolve_account(self, platform: str, account: str, user_id: str,
                              display_name: str = "") -> AccountRecord:
        """Get or create the account (and a new person for a first-seen account)."""

    async def link_accounts(self, keep_person_id: int, merge_person_id: int) -> None:
        """Move every account of `merge_person_id` onto `keep_person_id`."""

    async def get_person(self, person_id: int) -> PersonRecord | None: ...

    async def list_accounts(self, person_id: int) -> list[AccountRecord]: ...

    async def find_accounts(self, *, platform: str | None = None, user_id: str | None = None) -> list[AccountRecord]:
        """Accounts with this platform and/or platform user id (every account when both are None), by person."""

    async def forget_person(self, person_id: int) -> ForgottenPerson | None:
        """Delete the person, everyone merged into them, and what the database keeps about them: accounts, link
        codes, their sessions (with messages, summaries and goals), their messages in sessions shared with
        others, and inbox rows holding their messages. One transaction; None for an unknown person."""


class SessionStore(Protocol):
    """Sessions and their messages (append-only: compression changes the view, never the rows)."""

    async def active_session(self, key: str, bot: str) -> SessionRecord:
        """The newest session for `key` (created on first use)."""

    async def new_session(self, key: str, bot: str, parent_id: int | None = None) -> SessionRecord:
        """Start a fresh session for `key`; later `active_session` calls return it."""

    async def get_session(self, session_id: int) -> SessionRecord | None: ...

    async def update_session(self, session_id: int, *, model: str | None = ...,
                             state: dict[str, Any] | None = None) -> None: ...

    async def append_message(self, session_id: int, message: Message, *, person_id: int | None = None,
                             usage: Usage | None = None, model: str | None = None) -> int: ...

    async def append_messages(self, session_id: int, steps: Sequence[NewMessage]) -> list[int]:
        """Several messages in one write, in order, all or none; their ids, in the same order."""

    async def load_messages(self, session_id: int) -> list[Message]: ...

    async def load_stored_messages(self, session_id: int) -> list[StoredMessage]:
        """Like `load_messages`, with ids, person, usage, model and time."""

    async def session_usage(self, session_id: int) -> Usage: ...

    async def last_message_id(self, session_id: int) -> int | None:
        """The id of the session's newest stored message: whether anyone wrote to it since it was read."""

    async def newest_with_last_message(self, key: str, bot: str) -> tuple[SessionRecord, int | None]:
        """`active_session` and its `last_message_id` in one read: what a lane asks as it takes a session's
        lease (has another replica answered here since?)."""


class Inbox(Protocol):
    """The durable inbox: every inbound event once, until its answer is delivered."""

    async def record_inbound(self, platform: str, event_id: str, payload: dict[str, Any], *,
                             session_key: str | None = None) -> bool:
        """Insert a received event (of the session `session_key`, when given); False when it was seen before
        (a duplicate)."""

    async def complete_inbound(self, platform: str, event_id: str) -> None: ...

    async def complete_and_pending(self, platform: str, event_id: str, *, session_key: str) -> list[InboundEvent]:
        """`complete_inbound`, and what `pending_inbound(session_key=…)` then finds, in one round trip: a
        session's lane learns what to answer next as its turn ends, without reading the inbox again."""

    async def pending_inbound(self, platform: str | None = None, *,
                              session_key: str | None = None) -> list[InboundEvent]:
        """Events received but not answered (e.g. the process was killed mid-turn), oldest first. With
        `session_key`: that session's, plus those recorded without a session key (the caller sorts them),
        so a session's lane reads a few rows, not the whole inbox."""

    async def record_rejected(self, platform: str, event_id: str, payload: dict[str, Any]) -> None:
        """Keep an event too malformed to read (`payload`: why, and what it held) for an operator; never
        answered, never pending, pruned like completed ones. Once per (platform, event_id)."""

    async def rejected_inbound(self, platform: str | None = None, *, limit: int = 50) -> list[InboundEvent]:
        """The latest rejected events, newest first."""

    async def last_inbound(self, platform: str, account: str, *, since: datetime, limit: int) -> list[LastInbound]:
        """Per conversation of `account` on `platform` with a person's message recorded since `since`, the
        newest one recorded (engine-made messages and rejected events do not count); the `limit` conversations
        written in most recently, newest first."""

    async def prune_inbound(self, older_than: datetime) -> int:
        """Delete completed and rejected events received before `older_than`; returns how many."""


class GoalStore(Protocol):
    """Standing goals (/goal)."""

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


class LeaseStore(Protocol):
    """Named leases: a scheduled job runs on one process at a time. Holders are named by
    `hermes_engine.holders`, so that a lease of a process that is gone can be taken at once."""

    async def acquire_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        """Take or renew lease `name` for `ttl_seconds`; False while another holder's lease is live. A lease
        whose holder `hermes_engine.holders.holder_gone` finds gone is not live, whatever its expiry."""

    async def hand_over_lease(self, name: str, holder: str, to: str, ttl_seconds: float) -> bool:
        """Pass lease `name` from `holder` to `to` for `ttl_seconds`; False when `holder` no longer has it."""

    async def release_lease(self, name: str, holder: str) -> bool:
        """Give up lease `name` if `holder` holds it."""

    async def renew_lease(self, name: str, holder: str, ttl_seconds: float) -> bool:
        """Extend lease `name` for `ttl_seconds` only if `holder` has held it without a break: False when
        another holder took it since, also one that has given it back already (unlike `acquire_lease`, which
        would take a free lease again)."""


class LinkCodeStore(Protocol):
    """Short-lived codes that link a person's accounts across platforms (/link)."""

    async def create_link_code(self, code: str, person_id: int, ttl_seconds: float) -> None: ...

    async def redeem_link_code(self, code: str) -> int | None:
        """The person who made a live `code` (used up by this call), else None."""


class SearchIndex(Protocol):
    """Full-text search over stored conversations, scoped to what a person may see."""

    async def search_messages(self, *, person_id: int, bot: str, query: str, limit: int = 5) -> list[SearchHit]:
        """Ranked hits: the person's own user messages, and assistant messages and summaries of sessions
        the person took part in, within one bot. Tool output is not searchable."""

    async def export_session_ids(self, *, since: datetime | None = None,
                                 person_id: int | None = None) -> list[int]:
        """Sessions with a message at or after `since` (and, with `person_id`, in which that person wrote);
        oldest first."""


class CompactionLineage(Protocol):
    """The record of what compression summarised, so a restart rebuilds the same view."""

    async def record_compaction(self, *, session_id: int, first_message_id: int, last_message_id: int,
                                summary: str, tokens_before: int, tokens_after: int,
                                parent_id: int | None = None, reason: str = "agent") -> CompactionRecord: ...

    async def latest_compaction(self, session_id: int) -> CompactionRecord | None: ...

    async def list_compactions(self, session_ids: Sequence[int] | None = None) -> list[CompactionRecord]:
        """Compactions, oldest first (all, or of the given sessions)."""

    async def message_refs_after(self, session_id: int, after_id: int) -> list[MessageRef]:
        """The session's stored messages with an id above `after_id`, in order."""


class DeliveryLog(Protocol):
    """What each bot's outlets have shown per idempotency key (see `ports.reply.DeliveryLedger`)."""

    async def get_delivery(self, bot: str, platform: str, key: str) -> Delivery | None: ...

    async def record_delivery(self, bot: str, platform: str, key: str, message_ids: Sequence[str], *,
                              final: bool) -> None:
        """Upsert; a key already final stays as it is (a late interim write never reopens an answer)."""

    async def prune_deliveries(self, older_than: datetime) -> int:
        """Delete records last written before `older_than`; returns how many."""


class SkillEmbeddingCache(Protocol):
    """Embedding vectors of skills, keyed by (model, hash of the embedded text): a skill is embedded once per
    version and model, and a changed skill gets a new hash, so a stale vector is never read."""

    async def get_skill_embeddings(self, model: str, hashes: Sequence[str]) -> dict[str, list[float]]:
        """The stored vectors among `hashes` (missing ones are absent from the result)."""

    async def put_skill_embeddings(self, model: str, vectors: dict[str, list[float]]) -> None:
        """Store vectors by hash; an existing (model, hash) keeps its vector."""


@dataclass(frozen=True)
class StoredDocument:
    """A document's text, its version (1 after the first write, one more per write) and when it was written."""

    text: str
    version: int
    updated_at: datetime | None = None


class DocumentStore(Protocol):
    """Small text documents that would otherwise be files under HERMES_HOME (memory, USER.md, pairing), by
    `area` and a `/`-separated `path`, kept in the database so every replica reads and writes the same ones.
    Writes compare and set: a writer names the version it read, and loses (None) when another writer got
    there first, so no update is ever lost silently."""

    async def get_document(self, area: str, path: str) -> StoredDocument | None: ...

    async def put_document(self, area: str, path: str, text: str, *, expected_version: int) -> int | None:
        """Write when the stored version is still `expected_version` (0: the document must not exist yet);
        the new version, or None when the document changed since (nothing written)."""

    async def read_documents(self, area: str, prefix: str = "") -> dict[str, StoredDocument]:
        """Every document in `area` whose path starts with `prefix`, by path."""

    async def delete_documents(self, area: str, prefix: str) -> int:
        """Delete the document at path `prefix` and, when `prefix` ends with `/`, everything under it;
        returns how many."""


class ToolListStore(Protocol):
    """The tool lists sessions froze, by fingerprint (the SHA-256 of the text): a session evicted from
    memory or loaded after a restart lists the same tools, byte for byte, so the provider's cached prefix
    stays valid. Lists are shared (most sessions of a bot freeze the same one) and never change."""

    async def get_tool_list(self, fingerprint: str) -> str | None:
        """The list's JSON text exactly as it was put, or None."""

    async def put_tool_list(self, fingerprint: str, text: str) -> None:
        """Store the text once; an existing fingerprint keeps its text."""


@dataclass(frozen=True)
class DueReview:
    """A session's background review, recorded before it runs: what any replica needs to run it later."""

    bot: str
    session_id: int
    session_key: str
    person_id: int | None  # whose memory the review may write (the DM's owner, the group's speaker)
    memory: bool  # which prompts: the memory review, the skill review, or both
    skill: bool
    scope: dict[str, Any]  # what rebuilds the session's scope: chat kind, shared scope, reply target
    version: int  # grows with every mark; clearing names the version that ran
    due_at: datetime  # first marked


class ReviewQueue(Protocol):
    """Background reviews that are due, at most one per session. A review is marked before it runs and
    cleared when it ends, so one cut off with its replica is found and run by another."""

    async def mark_review_due(self, bot: str, session_id: int, *, session_key: str, person_id: int | None,
                              memory: bool, skill: bool, scope: dict[str, Any]) -> DueReview:
        """Record the session's review as due. Marking it again while it is due keeps one record: the
        prompts are added to it (never taken away), the rest replaced, and its version grows."""

    async def due_reviews(self, bot: str, session_id: int | None = None) -> list[DueReview]:
        """The bot's due reviews, oldest first (`session_id`: that session's only)."""

    async def clear_review(self, bot: str, session_id: int, version: int) -> bool:
        """Clear the session's record if it is still at `version` (a review marked again since stays
        due); True when cleared."""


@dataclass(frozen=True)
class ApprovalRecord:
    """A request for approval as every replica sees it: "pending" until the first answer ("decided", with
    the decision and who gave it) or until the replica that asked ends it ("ended": expired, superseded,
    its turn stopped)."""

    id: str
    bot: str
    session_key: str
    state: Literal["pending", "decided", "ended"]
    expires_at: datetime
    decision: str | None = None  # a `ports.approval.Decision` value, once decided
    decided_by: str | None = None  # the platform user id of whoever answered
    asked_by: str | None = None  # the platform user id of the person whose turn asked
    created_at: datetime | None = None  # when it was asked
    command: str | None = None  # what it asked to run or call, secrets redacted
    risk: str | None = None  # the class that needed approval ("dangerous", ...)
    decided_at: datetime | None = None  # when the answer was taken


class ApprovalStore(Protocol):
    """Pending approval requests, so a button press that reaches another replica than the one whose turn
    waits is still taken: that replica records the answer, the waiting one reads it. The first answer wins."""

    async def record_approval(self, request_id: str, bot: str, session_key: str, expires_at: datetime,
                              asked_by: str | None = None, *, command: str | None = None,
                              risk: str | None = None) -> None:
        """Record a pending request (`command` as shown to the approvers, secrets already redacted); requests
        that expired a day ago are swept on the way."""

    async def get_approval(self, request_id: str) -> ApprovalRecord | None: ...

    async def answer_approval(self, request_id: str, bot: str, decision: str, decided_by: str) -> bool:
        """Decide a pending request of `bot` that has not expired; True when this answer was the first (one
        statement, so two presses cannot both win)."""

    async def end_approval(self, request_id: str) -> ApprovalRecord | None:
        """End a request still pending (no answer is taken after this); the record as it stands then, so a
        caller sees an answer that got there first."""

    async def recent_approvals(self, *, bot: str | None = None, limit: int = 100) -> list[ApprovalRecord]:
        """The requests still kept (each is swept a day after it expired), newest first; `bot`'s only."""


class HistoryStore(SessionStore, CompactionLineage, Protocol):
    """What rebuilding a session's view (stored messages + the latest summary) needs."""


class Store(PeopleStore, SessionStore, Inbox, GoalStore, LeaseStore, LinkCodeStore, SearchIndex,
            CompactionLineage, DeliveryLog, CardStore, UsageLedger, SkillEmbeddingCache, DocumentStore, ToolListStore,
            ReviewQueue, ApprovalStore, ScheduledJobs, AttachmentBlobs, DashboardStore, ConversationBrowser,
            Protocol):
    """Every role at once, with a lifecycle: what the composition root opens."""

    async def init(self) -> None:
        """Apply migrations and open the pool. Idempotent."""

    async def close(self) -> None: ...
