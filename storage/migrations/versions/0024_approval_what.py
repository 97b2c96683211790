"""What a request for approval asked (the command or tool call, secrets redacted, and its risk class) and when
it was answered, so the dashboard shows who approved what.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | Sequence[str] | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("approval_requests") as batch:
        batch.add_column(sa.Column("command", sa.Text(), nullable=True))
        batch.add_column(sa.Column("risk", sa.String(64), nullable=True))
        batch.add_column(sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("approval_requests") as batch:
        batch.drop_column("decided_at")
        batch.drop_column("risk")
        batch.drop_column("command")
