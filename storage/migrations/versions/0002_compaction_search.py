"""Compaction lineage and full-text search over messages and summaries.

- `compactions`: one row per context compression of a session — the stored message ids the summary covers
  (first/last, inclusive; the messages themselves are never deleted), the summary, token counts before and
  after, and the compaction it updated (`parent_id`). A restart rebuilds the compressed view from it.
- `ix_messages_person_id_session_id`: "sessions this person took part in" (search scope, export filter).
- Full-text search, maintained by the database itself:
  SQLite: FTS5 external-content tables `messages_fts` (user and assistant messages only) and
  `compactions_fts`, kept in step by triggers, back-filled here; `porter unicode61` tokenizer.
  PostgreSQL: GIN indexes on `to_tsvector('english', ...)` of the same rows (partial: user/assistant).

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

SEARCHABLE_ROLES = "role IN ('user', 'assistant')"

SQLITE_UP = [
    # Messages: only what people and the assistant said (tool output is not searchable text).
    "CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    f"""CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages WHEN new.{SEARCHABLE_ROLES} BEGIN
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    END""",
    f"""CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages WHEN old.{SEARCHABLE_ROLES} BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    END""",
    # Only a change of the indexed text or of the role touches the index (link_accounts updates person_id).
    f"""CREATE TRIGGER messages_fts_au_old AFTER UPDATE OF content, role ON messages WHEN old.{SEARCHABLE_ROLES} BEGIN
        INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    END""",
    f"""CREATE TRIGGER messages_fts_au_new AFTER UPDATE OF content, role ON messages WHEN new.{SEARCHABLE_ROLES} BEGIN
        INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    END""",
    f"INSERT INTO messages_fts(rowid, content) SELECT id, content FROM messages WHERE {SEARCHABLE_ROLES}",
    # Compaction summaries.
    "CREATE VIRTUAL TABLE compactions_fts USING fts5(summary, content='compactions', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    """CREATE TRIGGER compactions_fts_ai AFTER INSERT ON compactions BEGIN
        INSERT INTO compactions_fts(rowid, summary) VALUES (new.id, new.summary);
    END""",
    """CREATE TRIGGER compactions_fts_ad AFTER DELETE ON compactions BEGIN
        INSERT INTO compactions_fts(compactions_fts, rowid, summary) VALUES ('delete', old.id, old.summary);
    END""",
    """CREATE TRIGGER compactions_fts_au AFTER UPDATE OF summary ON compactions BEGIN
        INSERT INTO compactions_fts(compactions_fts, rowid, summary) VALUES ('delete', old.id, old.summary);
        INSERT INTO compactions_fts(rowid, summary) VALUES (new.id, new.summary);
    END""",
]

SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS compactions_fts_au",
    "DROP TRIGGER IF EXISTS compactions_fts_ad",
    "DROP TRIGGER IF EXISTS compactions_fts_ai",
    "DROP TABLE IF EXISTS compactions_fts",
    "DROP TRIGGER IF EXISTS messages_fts_au_new",
    "DROP TRIGGER IF EXISTS messages_fts_au_old",
    "DROP TRIGGER IF EXISTS messages_fts_ad",
    "DROP TRIGGER IF EXISTS messages_fts_ai",
    "DROP TABLE IF EXISTS messages_fts",
]

# The expressions must stay identical to the ones `storage.repos.search` queries with, or the planner cannot use
# the indexes. Building them is online-safe enough for a migration run at start-up on moderate tables.
POSTGRES_UP = [
    "CREATE INDEX ix_messages_content_fts ON messages "
    f"USING GIN (to_tsvector('english'::regconfig, content)) WHERE {SEARCHABLE_ROLES}",
    "CREATE INDEX ix_compactions_summary_fts ON compactions USING GIN (to_tsvector('english'::regconfig, summary))",
]

POSTGRES_DOWN = [
    "DROP INDEX IF EXISTS ix_compactions_summary_fts",
    "DROP INDEX IF EXISTS ix_messages_content_fts",
]


def upgrade() -> None:
    op.create_table(
        "compactions",
        sa.Column("id", Id, nullable=False, autoincrement=True),
        sa.Column("session_id", Id, nullable=False),
        sa.Column("parent_id", Id, nullable=True),
        sa.Column("first_message_id", Id, nullable=False),
        sa.Column("last_message_id", Id, nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("reason", sa.String(16), nullable=False, server_default="agent"),
        sa.Column("tokens_before", sa.Integer(), nullable=False),
        sa.Column("tokens_after", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_compactions"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name="fk_compactions_session_id_sessions",
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["parent_id"], ["compactions.id"], name="fk_compactions_parent_id_compactions",
                                ondelete="SET NULL"),
    )
    op.create_index("ix_compactions_session_id_id", "compactions", ["session_id", "id"])
    op.create_index("ix_messages_person_id_session_id", "messages", ["person_id", "session_id"])

    dialect = op.get_bind().dialect.name
    for statement in SQLITE_UP if dialect == "sqlite" else POSTGRES_UP if dialect == "postgresql" else []:
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for statement in SQLITE_DOWN if dialect == "sqlite" else POSTGRES_DOWN if dialect == "postgresql" else []:
        op.execute(statement)
    op.drop_index("ix_messages_person_id_session_id", table_name="messages")
    op.drop_index("ix_compactions_session_id_id", table_name="compactions")
    op.drop_table("compactions")
