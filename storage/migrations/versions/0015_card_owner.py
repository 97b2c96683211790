"""Who made each kanban card and the shared conversation it was made in, so a person sees only their own cards
and those of the group, channel or thread they write in. Cards made before keep what their origin says: the
person who asked for them, and the chat when it was not a DM; one whose origin names neither is left to
admins.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Json = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
SHARED_KINDS = ("group", "channel", "thread")


def upgrade() -> None:
    with op.batch_alter_table("kanban_cards") as batch:
        batch.add_column(sa.Column("owner_id", Id, nullable=True))
        batch.add_column(sa.Column("shared_in", sa.String(512), nullable=True))
        batch.create_index("ix_kanban_cards_owner_id", ["owner_id"])
        batch.create_index("ix_kanban_cards_shared_in", ["shared_in"])
    cards = sa.table("kanban_cards", sa.column("origin", Json), sa.column("owner_id", Id),
                     sa.column("shared_in", sa.String(512)))
    origin = cards.c.origin
    op.execute(cards.update().values(owner_id=origin["person"].as_integer()))
    reply = [origin[("reply", name)].as_string() for name in ("platform", "account", "chat_id")]
    place = reply[0] + ":" + reply[1] + ":" + reply[2]  # as `hermes_engine.ports.cards.shared_conversation`
    op.execute(cards.update().where(origin[("for", "chat_kind")].as_string().in_(SHARED_KINDS),
                                    origin[("reply", "chat_id")].as_string().is_not(None))
               .values(shared_in=place))


def downgrade() -> None:
    with op.batch_alter_table("kanban_cards") as batch:
        batch.drop_index("ix_kanban_cards_shared_in")
        batch.drop_index("ix_kanban_cards_owner_id")
        batch.drop_column("shared_in")
        batch.drop_column("owner_id")
