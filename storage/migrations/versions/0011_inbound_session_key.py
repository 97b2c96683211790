"""Inbound events name their session, so a session's lane reads only its own pending events.

Events recorded before this revision keep no session key (NULL); readers asking for one session's events
get those too and sort them out themselves.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("inbound_events") as batch:
        batch.add_column(sa.Column("session_key", sa.String(512), nullable=True))
    op.create_index("ix_inbound_events_status_session_key_id", "inbound_events", ["status", "session_key", "id"])


def downgrade() -> None:
    op.drop_index("ix_inbound_events_status_session_key_id", table_name="inbound_events")
    with op.batch_alter_table("inbound_events") as batch:
        batch.drop_column("session_key")
