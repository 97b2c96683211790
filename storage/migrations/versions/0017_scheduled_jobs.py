"""The clock: scheduled jobs (reminders, tasks) and the time zone each person chose.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Json = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
When = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "scheduled_jobs",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("owner_id", Id, nullable=False),
        sa.Column("bot", sa.String(128), nullable=False),
        sa.Column("target", Json, nullable=False),
        sa.Column("session_key", sa.String(512), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("schedule", sa.String(255), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("next_due", When, nullable=True),
        sa.Column("once", sa.Boolean(), nullable=False),
        sa.Column("catch_up", sa.String(8), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("last_due", When, nullable=True),
        sa.Column("last_run_at", When, nullable=True),
        sa.Column("last_outcome", sa.Text(), nullable=True),
        sa.Column("created_at", When, nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["people.id"], ondelete="CASCADE",
                                name="fk_scheduled_jobs_owner_id_people"),
        sa.CheckConstraint("state IN ('active', 'paused', 'done', 'failed')", name="ck_scheduled_jobs_state"),
        sa.CheckConstraint("kind IN ('reminder', 'task')", name="ck_scheduled_jobs_kind"),
        sa.CheckConstraint("catch_up IN ('once', 'skip')", name="ck_scheduled_jobs_catch_up"),
        sa.PrimaryKeyConstraint("id", name="pk_scheduled_jobs"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_scheduled_jobs_bot_state_next_due", "scheduled_jobs", ["bot", "state", "next_due"])
    op.create_index("ix_scheduled_jobs_owner_id", "scheduled_jobs", ["owner_id"])
    op.create_table(
        "person_timezones",
        sa.Column("person_id", Id, nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("updated_at", When, nullable=False),
        sa.ForeignKeyConstraint(["person_id"], ["people.id"], ondelete="CASCADE",
                                name="fk_person_timezones_person_id_people"),
        sa.PrimaryKeyConstraint("person_id", name="pk_person_timezones"),
    )


def downgrade() -> None:
    op.drop_table("person_timezones")
    op.drop_index("ix_scheduled_jobs_owner_id", table_name="scheduled_jobs")
    op.drop_index("ix_scheduled_jobs_bot_state_next_due", table_name="scheduled_jobs")
    op.drop_table("scheduled_jobs")
