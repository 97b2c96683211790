"""One-time codes that join a person's accounts on different platforms (/link).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "link_codes",
        sa.Column("code", sa.String(32), nullable=False),
        sa.Column("person_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("code", name="pk_link_codes"),
        sa.ForeignKeyConstraint(["person_id"], ["people.id"], name="fk_link_codes_person_id_people",
                                ondelete="CASCADE"),
    )


def downgrade() -> None:
    op.drop_table("link_codes")
