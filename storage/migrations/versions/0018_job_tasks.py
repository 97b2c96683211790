"""Scheduled tasks: the tokens each job spent so far, the slot a task run started (so a run a crash cut is
recorded as interrupted, never run again), the runs a job has left (`repeat`) and the toolsets a task may use.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
When = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("scheduled_jobs") as batch:
        batch.add_column(sa.Column("tokens", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("started_due", When, nullable=True))
        batch.add_column(sa.Column("runs_left", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("toolsets", Json, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scheduled_jobs") as batch:
        batch.drop_column("toolsets")
        batch.drop_column("runs_left")
        batch.drop_column("started_due")
        batch.drop_column("tokens")
