"""The kanban board: cards, their dependencies and their history.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STATUSES = "'triage', 'todo', 'ready', 'running', 'blocked', 'done', 'archived'"


def upgrade() -> None:
    op.create_table(
        "kanban_cards",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("profile", sa.String(128), nullable=False),
        sa.Column("parent_id", Id, nullable=True),
        sa.Column("goal_mode", sa.Boolean(), nullable=False),
        sa.Column("origin", Json, nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("claim", sa.String(255), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(f"status IN ({STATUSES})", name="ck_kanban_cards_status"),
        sa.ForeignKeyConstraint(["parent_id"], ["kanban_cards.id"], name="fk_kanban_cards_parent_id_kanban_cards",
                                ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name="pk_kanban_cards"),
    )
    op.create_index("ix_kanban_cards_profile_status_id", "kanban_cards", ["profile", "status", "id"])
    op.create_index("ix_kanban_cards_parent_id", "kanban_cards", ["parent_id"])
    op.create_table(
        "kanban_dependencies",
        sa.Column("card_id", Id, nullable=False),
        sa.Column("depends_on", Id, nullable=False),
        sa.ForeignKeyConstraint(["card_id"], ["kanban_cards.id"],
                                name="fk_kanban_dependencies_card_id_kanban_cards", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["depends_on"], ["kanban_cards.id"],
                                name="fk_kanban_dependencies_depends_on_kanban_cards", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("card_id", "depends_on", name="pk_kanban_dependencies"),
    )
    op.create_index("ix_kanban_dependencies_depends_on", "kanban_dependencies", ["depends_on"])
    op.create_table(
        "kanban_events",
        sa.Column("id", Id, autoincrement=True, nullable=False),
        sa.Column("card_id", Id, nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("from_status", sa.String(16), nullable=True),
        sa.Column("to_status", sa.String(16), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("handoff", Json, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["card_id"], ["kanban_cards.id"], name="fk_kanban_events_card_id_kanban_cards",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_kanban_events"),
    )
    op.create_index("ix_kanban_events_card_id_id", "kanban_events", ["card_id", "id"])


def downgrade() -> None:
    op.drop_table("kanban_events")
    op.drop_table("kanban_dependencies")
    op.drop_table("kanban_cards")
