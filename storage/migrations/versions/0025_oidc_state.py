"""The dashboard's single sign-ons under way (OpenID Connect): the hash of each `state` and of the secret the
browser that started it holds, kept for a few minutes and deleted when the provider sends the browser back.

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | Sequence[str] | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "dashboard_oidc_states",
        sa.Column("state_hash", sa.String(64), nullable=False),
        sa.Column("browser_hash", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("state_hash", name="pk_dashboard_oidc_states"),
    )
    op.create_index("ix_dashboard_oidc_states_expires_at", "dashboard_oidc_states", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_dashboard_oidc_states_expires_at", table_name="dashboard_oidc_states")
    op.drop_table("dashboard_oidc_states")
