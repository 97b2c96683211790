"""Ids are never handed out twice, so a log line or an export naming "person 5" names one person for good.

SQLite gives a new row the largest id in the table plus one: after the newest person is forgotten, the
next one gets their id. With AUTOINCREMENT it keeps the largest id it ever gave in `sqlite_sequence` and
goes past it. SQLite cannot add AUTOINCREMENT to a table, so each table with an integer id is rebuilt (batch
mode: a copy, the original dropped, the copy renamed; `storage.migrate` runs this with foreign keys off, so
the drop cascades nowhere, and checks every reference before the commit). Its sequence starts at the
largest id the table holds, which is all that can be known of the ids given before. The full-text triggers
on `messages` and `compactions` go with their tables and are made again.

PostgreSQL's sequences never go back: nothing to do there.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every table whose primary key is an integer id SQLite chooses.
TABLES = ("people", "accounts", "sessions", "messages", "compactions", "inbound_events", "goals",
          "kanban_cards", "kanban_events")


def upgrade() -> None:
    _rebuild(autoincrement=True)


def downgrade() -> None:
    _rebuild(autoincrement=False)


def _rebuild(*, autoincrement: bool) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    triggers = bind.execute(sa.text(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN :tables ORDER BY name")
        .bindparams(sa.bindparam("tables", expanding=True)), {"tables": list(TABLES)}).scalars().all()
    for table in TABLES:
        with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}):
            pass
    if autoincrement:
        for table in TABLES:  # the copy's inserts started each sequence; say it outright, whatever they did
            op.execute(sa.text("DELETE FROM sqlite_sequence WHERE name = :t").bindparams(t=table))
            op.execute(sa.text(f'INSERT INTO sqlite_sequence (name, seq) SELECT :t, MAX(id) FROM "{table}" '
                               "HAVING MAX(id) IS NOT NULL").bindparams(t=table))
    for trigger in triggers:
        op.execute(trigger)
