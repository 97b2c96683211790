"""Initial schema: people, accounts, sessions, messages, inbound events, goals, leases.

Revision ID: 0001
Revises:
Create Date: 2025-01-01 00:00:00

Written by hand and frozen: it does not import `storage.models`, so later model changes cannot
rewrite history. Every constraint and index is named explicitly (the names follow
`storage.models.NAMING_CONVENTION`).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# revision identifiers, used by Alembic.
revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def Timestamp() -> sa.DateTime:  # noqa: N802 - reads like a type
    return sa.DateTime(timezone=True)


OPEN_GOAL = sa.text("status IN ('active', 'paused')")


def upgrade() -> None:
    op.create_table(
        "people",
        sa.Column("id", Id, nullable=False, autoincrement=True),
        sa.Column("display_name", sa.String(255), nullable=False),
        sa.Column("merged_into", Id, nullable=True),
        sa.Column("created_at", Timestamp(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_people"),
        sa.ForeignKeyConstraint(["merged_into"], ["people.id"], name="fk_people_merged_into_people",
                                ondelete="SET NULL"),
    )

    op.create_table(
        "accounts",
        sa.Column("id", Id, nullable=False, autoincrement=True),
        sa.Column("person_id", Id, nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("account", sa.String(255), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("display_name", sa.String(255), nullable=False),
        sa.Column("created_at", Timestamp(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_accounts"),
        sa.ForeignKeyConstraint(["person_id"], ["people.id"], name="fk_accounts_person_id_people",
                                ondelete="CASCADE"),
        sa.UniqueConstraint("platform", "account", "user_id", name="uq_accounts_platform_account_user_id"),
    )
    op.create_index("ix_accounts_person_id", "accounts", ["person_id"])

    op.create_table(
        "sessions",
        sa.Column("id", Id, nullable=False, autoincrement=True),
        sa.Column("key", sa.String(512), nullable=False),
        sa.Column("bot", sa.String(128), nullable=False),
        sa.Column("parent_id", Id, nullable=True),
        sa.Column("model", sa.String(255), nullable=True),
        sa.Column("state", Json, nullable=False),
        sa.Column("created_at", Timestamp(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_sessions"),
        sa.ForeignKeyConstraint(["parent_id"], ["sessions.id"], name="fk_sessions_parent_id_sessions",
                                ondelete="SET NULL"),
    )
    op.create_index("ix_sessions_bot_key_id", "sessions", ["bot", "key", "id"])

    op.create_table(
        "messages",
        sa.Column("id", Id, nullable=False, autoincrement=True),
        sa.Column("session_id", Id, nullable=False),
        sa.Column("person_id", Id, nullable=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("tool_calls", Json, nullable=True),
        sa.Column("tool_call_id", sa.String(255), nullable=True),
        sa.Column("tool_name", sa.String(255), nullable=True),
        sa.Column("is_error", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("images", Json, nullable=True),
        sa.Column("meta", Json, nullable=True),
        sa.Column("input_tokens", sa.Integer(), nullable=True),
        sa.Column("output_tokens", sa.Integer(), nullable=True),
        sa.Column("cache_read_tokens", sa.Integer(), nullable=True),
        sa.Column("cache_write_tokens", sa.Integer(), nullable=True),
        sa.Column("model", sa.String(255), nullable=True),
        sa.Column("created_at", Timestamp(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_messages"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_messages_session_id_sessions",
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["person_id"], ["people.id"], name="fk_messages_person_id_people",
                                ondelete="SET NULL"),
    )
    op.create_index("ix_messages_session_id_id", "messages", ["session_id", "id"])

    op.create_table(
        "inbound_events",
        sa.Column("id", Id, nullable=False, autoincrement=True),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("event_id", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="received"),
        sa.Column("payload", Json, nullable=False),
        sa.Column("created_at", Timestamp(), nullable=False),
        sa.Column("completed_at", Timestamp(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_inbound_events"),
        sa.UniqueConstraint("platform", "event_id", name="uq_inbound_events_platform_event_id"),
    )
    op.create_index("ix_inbound_events_status_id", "inbound_events", ["status", "id"])

    op.create_table(
        "goals",
        sa.Column("id", Id, nullable=False, autoincrement=True),
        sa.Column("session_key", sa.String(512), nullable=False),
        sa.Column("bot", sa.String(128), nullable=False),
        sa.Column("session_id", Id, nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False, server_default="active"),
        sa.Column("turns_used", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("tokens_used", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("verdicts", Json, nullable=False),
        sa.Column("target", Json, nullable=False),
        sa.Column("created_at", Timestamp(), nullable=False),
        sa.Column("updated_at", Timestamp(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_goals"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_goals_session_id_sessions",
                                ondelete="SET NULL"),
        sa.CheckConstraint("status IN ('active', 'paused', 'done', 'blocked', 'cleared')",
                           name="ck_goals_status"),
    )
    op.create_index("ix_goals_session_key_bot_id", "goals", ["session_key", "bot", "id"])
    op.create_index("ix_goals_status", "goals", ["status"])
    op.create_index("uq_goals_open_session_key_bot", "goals", ["session_key", "bot"], unique=True,
                    sqlite_where=OPEN_GOAL, postgresql_where=OPEN_GOAL)

    op.create_table(
        "leases",
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("expires_at", Timestamp(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_leases"),
    )


def downgrade() -> None:
    op.drop_table("leases")
    op.drop_index("uq_goals_open_session_key_bot", table_name="goals")
    op.drop_index("ix_goals_status", table_name="goals")
    op.drop_index("ix_goals_session_key_bot_id", table_name="goals")
    op.drop_table("goals")
    op.drop_index("ix_inbound_events_status_id", table_name="inbound_events")
    op.drop_table("inbound_events")
    op.drop_index("ix_messages_session_id_id", table_name="messages")
    op.drop_table("messages")
    op.drop_index("ix_sessions_bot_key_id", table_name="sessions")
    op.drop_table("sessions")
    op.drop_index("ix_accounts_person_id", table_name="accounts")
    op.drop_table("accounts")
    op.drop_table("people")
