"""SQLAlchemy 2.0 declarative models: the schema as the code sees it.

The schema as the database gets it is `storage/migrations/versions/` — the models never create tables
(`tests/unit/test_storage.py` checks that the two agree). Nothing outside `storage/` imports these
classes; the store hands out the plain records of `hermes_engine.ports.storage`.

Portable types:
- ids are BIGINT on PostgreSQL and INTEGER (the rowid alias, so autoincrement works) on SQLite, where
  AUTOINCREMENT keeps an id of a deleted row from being given again (PostgreSQL's sequences never do);
- JSON is JSONB on PostgreSQL, JSON text on SQLite; Python `None` is stored as SQL NULL;
- timestamps are stored in UTC and always come back timezone-aware (SQLite keeps no zone).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Mapped, mapped_column

from storage.schema_base import NAMING_CONVENTION as NAMING_CONVENTION
from storage.schema_base import Base as Base
from storage.schema_base import Id as Id
from storage.schema_base import table_of as table_of
from storage.usage_rows import UsageModelRow as UsageModelRow  # the usage ledger's rows
from storage.usage_rows import UsageRow as UsageRow

# Goal statuses. "active" and "paused" are open (at most one open goal per session key and bot).
GOAL_STATUSES = ("active", "paused", "done", "blocked", "cleared")
OPEN_GOAL_STATUSES = ("active", "paused")
_OPEN_GOAL_SQL = f"status IN ({', '.join(repr(s) for s in OPEN_GOAL_STATUSES)})"

# Inbound event statuses.
INBOUND_RECEIVED = "received"
INBOUND_DONE = "done"
INBOUND_REJECTED = "rejected"  # too malformed to read: kept for an operator, never answered

# Tables whose ids SQLite chooses: AUTOINCREMENT, so an id of a deleted row is never given again (migration 0016).
_NEVER_REUSED_IDS: dict[str, Any] = {"sqlite_autoincrement": True}
JsonType = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend (naive values are taken as UTC)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":  # stored as text; keep one format so comparisons stay lexical
            value = value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class PersonRow(Base):
    """A human. One person has one account per platform account; accounts can be linked."""

    __tablename__ = "people"
    __table_args__ = (_NEVER_REUSED_IDS,)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    display_name: Mapped[str] = mapped_column(sa.String(255), nullable=False, default="")
    # Set when this person was merged into another by `link_accounts`; the row is kept, not deleted.
    merged_into: Mapped[int | None] = mapped_column(
        Id, sa.ForeignKey("people.id", ondelete="SET NULL"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class AccountRow(Base):
    """A user on one platform account (bot / workspace / guild)."""

    __tablename__ = "accounts"
    __table_args__ = (
        sa.UniqueConstraint("platform", "account", "user_id"),
        sa.Index(None, "person_id"),
        _NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    person_id: Mapped[int] = mapped_column(
        Id, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False)
    platform: Mapped[str] = mapped_column(sa.String(32), nullable=False)
    account: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    user_id: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    display_name: Mapped[str] = mapped_column(sa.String(255), nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class SessionRow(Base):
    """A conversation. A new session for the same key (/new, compression) points at its parent."""

    __tablename__ = "sessions"
    __table_args__ = (sa.Index(None, "bot", "key", "id"), _NEVER_REUSED_IDS)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(sa.String(512), nullable=False)
    bot: Mapped[str] = mapped_column(sa.String(128), nullable=False)
    parent_id: Mapped[int | None] = mapped_column(
        Id, sa.ForeignKey("sessions.id", ondelete="SET NULL"), nullable=True)
    model: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    state: Mapped[dict[str, Any]] = mapped_column(JsonType, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class MessageRow(Base):
    """One `hermes_engine.ports.conversation.Message` (its `to_dict()` fields) plus usage."""

    __tablename__ = "messages"
    __table_args__ = (
        sa.Index(None, "session_id", "id"),
        sa.Index(None, "person_id", "session_id"),  # migration 0002: sessions a person took part in
        _NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    session_id: Mapped[int] = mapped_column(
        Id, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False)
    person_id: Mapped[int | None] = mapped_column(
        Id, sa.ForeignKey("people.id", ondelete="SET NULL"), nullable=True)
    role: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    content: Mapped[str] = mapped_column(sa.Text(), nullable=False)
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JsonType, nullable=True)
    tool_call_id: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    tool_name: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    is_error: Mapped[bool] = mapped_column(sa.Boolean(), nullable=False, default=False,
                                           server_default=sa.false())
    images: Mapped[list[dict[str, Any]] | None] = mapped_column(JsonType, nullable=True)
    meta: Mapped[dict[str, Any] | None] = mapped_column(JsonType, nullable=True)
    # NULL token columns mean "no usage reported" (different from a reported zero).
    input_tokens: Mapped[int | None] = mapped_column(sa.Integer(), nullable=True)
    output_tokens: Mapped[int | None] = mapped_column(sa.Integer(), nullable=True)
    cache_read_tokens: Mapped[int | None] = mapped_column(sa.Integer(), nullable=True)
    cache_write_tokens: Mapped[int | None] = mapped_column(sa.Integer(), nullable=True)
    model: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class CompactionRow(Base):
    """One context compression of a session (migration 0002): the summary of the stored messages
    `first_message_id`..`last_message_id` (inclusive; the messages themselves are kept), and the
    compaction it updated. Full-text search over summaries is database-only (see 0002)."""

    __tablename__ = "compactions"
    __table_args__ = (sa.Index(None, "session_id", "id"), _NEVER_REUSED_IDS)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    session_id: Mapped[int] = mapped_column(
        Id, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False)
    parent_id: Mapped[int | None] = mapped_column(
        Id, sa.ForeignKey("compactions.id", ondelete="SET NULL"), nullable=True)
    first_message_id: Mapped[int] = mapped_column(Id, nullable=False)
    last_message_id: Mapped[int] = mapped_column(Id, nullable=False)
    summary: Mapped[str] = mapped_column(sa.Text(), nullable=False)
    reason: Mapped[str] = mapped_column(sa.String(16), nullable=False, default="agent", server_default="agent")
    tokens_before: Mapped[int] = mapped_column(sa.Integer(), nullable=False)
    tokens_after: Mapped[int] = mapped_column(sa.Integer(), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class InboundEventRow(Base):
    """The durable inbox: one row per platform event id, for de-duplication and crash recovery."""

    __tablename__ = "inbound_events"
    __table_args__ = (
        sa.UniqueConstraint("platform", "event_id"),
        sa.Index(None, "status", "id"),
        sa.Index(None, "status", "session_key", "id"),
        _NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    platform: Mapped[str] = mapped_column(sa.String(32), nullable=False)
    event_id: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    # The session the event belongs to, so a session's lane reads its own pending events, not all of them.
    # None on events recorded before the column existed (and by callers that do not say).
    session_key: Mapped[str | None] = mapped_column(sa.String(512), nullable=True)
    status: Mapped[str] = mapped_column(sa.String(16), nullable=False, default=INBOUND_RECEIVED,
                                        server_default=INBOUND_RECEIVED)
    payload: Mapped[dict[str, Any]] = mapped_column(JsonType, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class GoalRow(Base):
    """A /goal: a standing objective the agent keeps working on across turns until judged done."""

    __tablename__ = "goals"
    __table_args__ = (
        sa.CheckConstraint(f"status IN ({', '.join(repr(s) for s in GOAL_STATUSES)})", name="status"),
        sa.Index(None, "session_key", "bot", "id"),
        sa.Index(None, "status"),
        # At most one open goal per session key and bot.
        sa.Index("uq_goals_open_session_key_bot", "session_key", "bot", unique=True,
                 sqlite_where=sa.text(_OPEN_GOAL_SQL), postgresql_where=sa.text(_OPEN_GOAL_SQL)),
        _NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    session_key: Mapped[str] = mapped_column(sa.String(512), nullable=False)
    bot: Mapped[str] = mapped_column(sa.String(128), nullable=False)
    session_id: Mapped[int | None] = mapped_column(
        Id, sa.ForeignKey("sessions.id", ondelete="SET NULL"), nullable=True)
    text: Mapped[str] = mapped_column(sa.Text(), nullable=False)
    status: Mapped[str] = mapped_column(sa.String(16), nullable=False, default="active",
                                        server_default="active")
    turns_used: Mapped[int] = mapped_column(sa.Integer(), nullable=False, default=0, server_default="0")
    tokens_used: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False, default=0,
                                             server_default="0")
    verdicts: Mapped[list[dict[str, Any]]] = mapped_column(JsonType, nullable=False)
    target: Mapped[dict[str, Any]] = mapped_column(JsonType, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class LeaseRow(Base):
    """A named, expiring lock so that only one replica runs a scheduled job."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(sa.String(255), primary_key=True)
    holder: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class LinkCodeRow(Base):
    """A one-time code joining a person's accounts on two platforms (/link)."""

    __tablename__ = "link_codes"

    code: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    person_id: Mapped[int] = mapped_column(Id, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class DeliveryRow(Base):
    """What a bot's outlet has shown for one idempotency key (an answer, a note): its platform message
    ids in order, and whether the final text has landed. Lets a restarted gateway finish a reply in place."""

    __tablename__ = "deliveries"
    __table_args__ = (sa.Index(None, "updated_at"),)

    bot: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    platform: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(255), primary_key=True)
    message_ids: Mapped[list[str]] = mapped_column(JsonType, nullable=False)
    final: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


CARD_STATUSES = ("triage", "todo", "ready", "running", "blocked", "done", "archived")


class CardRow(Base):
    """A kanban card: a task the dispatcher hands to a worker of its profile once its dependencies are done."""

    __tablename__ = "kanban_cards"
    __table_args__ = (
        sa.CheckConstraint(f"status IN ({', '.join(repr(s) for s in CARD_STATUSES)})", name="status"),
        sa.Index(None, "profile", "status", "id"),
        sa.Index(None, "parent_id"),
        sa.Index(None, "owner_id"),
        sa.Index(None, "shared_in"),
        _NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    title: Mapped[str] = mapped_column(sa.Text(), nullable=False)
    body: Mapped[str] = mapped_column(sa.Text(), nullable=False)
    status: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    profile: Mapped[str] = mapped_column(sa.String(128), nullable=False)
    parent_id: Mapped[int | None] = mapped_column(
        Id, sa.ForeignKey("kanban_cards.id", ondelete="SET NULL"), nullable=True)
    goal_mode: Mapped[bool] = mapped_column(sa.Boolean(), nullable=False, default=False)
    origin: Mapped[dict[str, Any]] = mapped_column(JsonType, nullable=False)
    result: Mapped[str | None] = mapped_column(sa.Text(), nullable=True)
    reason: Mapped[str | None] = mapped_column(sa.Text(), nullable=True)
    attempts: Mapped[int] = mapped_column(sa.Integer(), nullable=False, default=0)
    failures: Mapped[int] = mapped_column(sa.Integer(), nullable=False, default=0)
    claim: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    tokens_in: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False, default=0, server_default="0")
    tokens_out: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False, default=0, server_default="0")
    model_calls: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False, default=0, server_default="0")
    owner_id: Mapped[int | None] = mapped_column(Id, nullable=True)  # the person who made it
    shared_in: Mapped[str | None] = mapped_column(sa.String(512), nullable=True)  # its group, channel or thread


class CardDependencyRow(Base):
    """Card `card_id` waits for card `depends_on` to be done."""

    __tablename__ = "kanban_dependencies"
    __table_args__ = (sa.Index(None, "depends_on"),)

    card_id: Mapped[int] = mapped_column(Id, sa.ForeignKey("kanban_cards.id", ondelete="CASCADE"),
                                         primary_key=True)
    depends_on: Mapped[int] = mapped_column(Id, sa.ForeignKey("kanban_cards.id", ondelete="CASCADE"),
                                            primary_key=True)


class CardEventRow(Base):
    """One line of a card's history (who moved what, when, why; an attempt's handoff)."""

    __tablename__ = "kanban_events"
    __table_args__ = (sa.Index(None, "card_id", "id"), _NEVER_REUSED_IDS)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    card_id: Mapped[int] = mapped_column(Id, sa.ForeignKey("kanban_cards.id", ondelete="CASCADE"),
                                         nullable=False)
    actor: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    kind: Mapped[str] = mapped_column(sa.String(32), nullable=False)
    from_status: Mapped[str | None] = mapped_column(sa.String(16), nullable=True)
    to_status: Mapped[str | None] = mapped_column(sa.String(16), nullable=True)
    reason: Mapped[str] = mapped_column(sa.Text(), nullable=False)
    handoff: Mapped[dict[str, Any]] = mapped_column(JsonType, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class SkillEmbeddingRow(Base):
    """One skill's embedding vector for one model, keyed by the hash of the text that was embedded."""

    __tablename__ = "skill_embeddings"

    model: Mapped[str] = mapped_column(sa.String(200), primary_key=True)
    content_hash: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    vector: Mapped[list[float]] = mapped_column(JsonType, nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class DocumentRow(Base):
    """A small text document that lives in the database instead of under HERMES_HOME (a person's MEMORY.md,
    USER.md, pairing state), by area and path. `version` grows by one per write: a writer names the version it
    read, so two replicas changing one document cannot lose an update."""

    __tablename__ = "documents"

    area: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    path: Mapped[str] = mapped_column(sa.String(512), primary_key=True)
    body: Mapped[str] = mapped_column(sa.Text(), nullable=False)
    version: Mapped[int] = mapped_column(sa.Integer(), nullable=False)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class ToolListRow(Base):
    """A tool list some session froze, by the SHA-256 of its text. Text, not JSON: the bytes are what the
    provider's cache sees, and JSONB would reorder the keys."""

    __tablename__ = "tool_lists"

    fingerprint: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    text: Mapped[str] = mapped_column(sa.Text(), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class DueReviewRow(Base):
    """A background review that is due for a session (migration 0012): marked before it runs, deleted when
    it ends, so a review cut off with its replica is run by another."""

    __tablename__ = "due_reviews"
    __table_args__ = (sa.Index(None, "bot", "due_at"),)

    bot: Mapped[str] = mapped_column(sa.String(128), primary_key=True)
    session_id: Mapped[int] = mapped_column(Id, sa.ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    session_key: Mapped[str] = mapped_column(sa.String(512), nullable=False)
    person_id: Mapped[int | None] = mapped_column(Id, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=True)
    memory: Mapped[bool] = mapped_column(sa.Boolean(), nullable=False)
    skill: Mapped[bool] = mapped_column(sa.Boolean(), nullable=False)
    scope: Mapped[dict[str, Any]] = mapped_column(JsonType, nullable=False)
    version: Mapped[int] = mapped_column(sa.Integer(), nullable=False)
    due_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)


class ApprovalRow(Base):
    """A request for approval every replica can answer (`ApprovalStore`): pending until the first answer or
    until the replica that asked ends it; what it asked and who answered when, for the dashboard. Swept a day
    after it expired."""

    __tablename__ = "approval_requests"
    __table_args__ = (sa.Index(None, "expires_at"),)

    id: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    bot: Mapped[str] = mapped_column(sa.String(128), nullable=False)
    session_key: Mapped[str] = mapped_column(sa.String(512), nullable=False)
    state: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    decision: Mapped[str | None] = mapped_column(sa.String(16), nullable=True)
    decided_by: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    asked_by: Mapped[str | None] = mapped_column(sa.String(255), nullable=True)  # migration 0014
    command: Mapped[str | None] = mapped_column(sa.Text(), nullable=True)  # migration 0024: what it asked
    risk: Mapped[str | None] = mapped_column(sa.String(64), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


# Scheduled job states (migration 0017). "active" and "paused" are open; "done" and "failed" are over.
JOB_STATES = ("active", "paused", "done", "failed")
JOB_KINDS = ("reminder", "task")


class ScheduledJobRow(Base):
    """A reminder or a scheduled task (the clock, migrations 0017 to 0019): its schedule, its zone, where it
    goes and what its last run did. `next_due` is the slot a run compares and sets."""

    __tablename__ = "scheduled_jobs"
    __table_args__ = (
        sa.CheckConstraint(f"state IN ({', '.join(repr(s) for s in JOB_STATES)})", name="state"),
        sa.CheckConstraint(f"kind IN ({', '.join(repr(k) for k in JOB_KINDS)})", name="kind"),
        sa.CheckConstraint("catch_up IN ('once', 'skip')", name="catch_up"),
        sa.Index(None, "bot", "state", "next_due"),
        sa.Index(None, "owner_id"),
        _NEVER_REUSED_IDS,
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    owner_id: Mapped[int] = mapped_column(Id, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False)
    bot: Mapped[str] = mapped_column(sa.String(128), nullable=False)
    target: Mapped[dict[str, Any]] = mapped_column(JsonType, nullable=False)
    session_key: Mapped[str] = mapped_column(sa.String(512), nullable=False)
    name: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    schedule: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    timezone: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    kind: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    text: Mapped[str] = mapped_column(sa.Text(), nullable=False)
    state: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    next_due: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    once: Mapped[bool] = mapped_column(sa.Boolean(), nullable=False)
    catch_up: Mapped[str] = mapped_column(sa.String(8), nullable=False)
    failures: Mapped[int] = mapped_column(sa.Integer(), nullable=False)
    runs: Mapped[int] = mapped_column(sa.Integer(), nullable=False)
    last_due: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_outcome: Mapped[str | None] = mapped_column(sa.Text(), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
    # 0018: a task's tokens so far; the slot a task run started (set before the model is called, cleared by
    # the record: one left set was cut by a crash); runs left (`repeat`, None: unbounded); a task's toolsets.
    tokens: Mapped[int] = mapped_column(sa.BigInteger(), nullable=False, default=0, server_default="0")
    started_due: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    runs_left: Mapped[int | None] = mapped_column(sa.Integer(), nullable=True)
    toolsets: Mapped[list[str] | None] = mapped_column(JsonType, nullable=True)
    # 0019: a task's answer that was produced and not delivered, and the slot it was produced for: its
    # delivery is retried alone, under that slot's key, and the agent is not run again.
    undelivered: Mapped[str | None] = mapped_column(sa.Text(), nullable=True)
    undelivered_due: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class PersonTimezoneRow(Base):
    """The IANA zone a person chose (`/timezone`, migration 0017); none: UTC."""

    __tablename__ = "person_timezones"

    person_id: Mapped[int] = mapped_column(Id, sa.ForeignKey("people.id", ondelete="CASCADE"), primary_key=True)
    timezone: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), nullable=False)
