"""The web dashboard: one-time sign-in links and signed-in sessions (hashes only), and the audit of what
admins changed through it.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | Sequence[str] | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
When = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "dashboard_links",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("admin", sa.String(255), nullable=False),
        sa.Column("expires_at", When, nullable=False),
        sa.PrimaryKeyConstraint("token_hash", name="pk_dashboard_links"),
    )
    op.create_index("ix_dashboard_links_expires_at", "dashboard_links", ["expires_at"])
    op.create_table(
        "dashboard_sessions",
        sa.Column("session_hash", sa.String(64), nullable=False),
        sa.Column("admin", sa.String(255), nullable=False),
        sa.Column("created_at", When, nullable=False),
        sa.Column("expires_at", When, nullable=False),
        sa.PrimaryKeyConstraint("session_hash", name="pk_dashboard_sessions"),
    )
    op.create_index("ix_dashboard_sessions_expires_at", "dashboard_sessions", ["expires_at"])
    op.create_table(
        "dashboard_audit",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("at", When, nullable=False),
        sa.Column("admin", sa.String(255), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_dashboard_audit"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_dashboard_audit_at", "dashboard_audit", ["at"])


def downgrade() -> None:
    op.drop_index("ix_dashboard_audit_at", table_name="dashboard_audit")
    op.drop_table("dashboard_audit")
    op.drop_index("ix_dashboard_sessions_expires_at", table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
    op.drop_index("ix_dashboard_links_expires_at", table_name="dashboard_links")
    op.drop_table("dashboard_links")
