"""long-term memory items, offload cursors, recall index

Revision ID: 0003_memory
Revises: 0002_context

Full-text search: on SQLite, FTS5 tables kept in step with `memory_items` and
`messages` by triggers (the porter stemmer over unicode61 words, each row tagged
with its owner); on PostgreSQL,
GIN indexes over the same `to_tsvector('simple', ...)` expressions the recall
queries use.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0003_memory"
down_revision = "0002_context"
branch_labels = None
depends_on = None

_FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"

# Each indexed row carries its owner as one token (the hex of "kind:id"), so a
# search matches the owner's rows inside the index instead of filtering every
# owner's matches afterwards: recall stays fast however many people use the bot.
_OWNER_TOKEN = "hex({kind} || ':' || {id})"

_SQLITE_FTS = [
    # Memory items are few and may be forgotten: a plain FTS5 table that supports deletes.
    f"CREATE VIRTUAL TABLE memory_items_fts USING fts5(owner, search_text, tokenize='{_FTS_TOKENIZER}')",
    "CREATE TRIGGER memory_items_fts_insert AFTER INSERT ON memory_items BEGIN "
    "INSERT INTO memory_items_fts(rowid, owner, search_text) VALUES (new.id, "
    + _OWNER_TOKEN.format(kind="new.owner_kind", id="new.owner_id")
    + ", new.search_text); END",
    "CREATE TRIGGER memory_items_fts_delete AFTER DELETE ON memory_items BEGIN "
    "DELETE FROM memory_items_fts WHERE rowid = old.id; END",
    "CREATE TRIGGER memory_items_fts_update AFTER UPDATE OF search_text ON memory_items BEGIN "
    "DELETE FROM memory_items_fts WHERE rowid = old.id; "
    "INSERT INTO memory_items_fts(rowid, owner, search_text) VALUES (new.id, "
    + _OWNER_TOKEN.format(kind="new.owner_kind", id="new.owner_id")
    + ", new.search_text); END",
    # Messages are append-only and many: a contentless index (no second copy of the text).
    # `Store.append` writes each message's row in the same transaction, with CJK text
    # split into characters (FTS5's unicode61 would take a whole unspaced run as one word).
    f"CREATE VIRTUAL TABLE messages_fts USING fts5(owner, content, content='', tokenize='{_FTS_TOKENIZER}')",
    # Messages stored before this migration become searchable too.
    "INSERT INTO messages_fts(rowid, owner, content) SELECT m.id, "
    + _OWNER_TOKEN.format(kind="s.owner_kind", id="s.owner_id")
    + ", m.content FROM messages m JOIN sessions s ON s.id = m.session_id WHERE m.role != 'system'",
]


def upgrade() -> None:
    op.create_table(
        "memory_items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("owner_id", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("source_seq", sa.Integer(), nullable=True),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("search_text", sa.Text(), nullable=False),
        sa.Column("content_key", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("importance", sa.Integer(), nullable=False),
        sa.Column("source", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("mentions", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        batch_op.create_index("ix_memory_items_owner", ["owner_kind", "owner_id", "updated_at"], unique=False)
        batch_op.create_index(
            "ix_memory_items_owner_key", ["owner_kind", "owner_id", "content_key"], unique=False
        )

    op.create_table(
        "memory_cursors",
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("owner_kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("owner_id", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("offloads", sa.Integer(), nullable=False),
        sa.Column("written", sa.Integer(), nullable=False),
        sa.Column("merged", sa.Integer(), nullable=False),
        sa.Column("deduped", sa.Integer(), nullable=False),
        sa.Column("resets", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id"),
    )
    with op.batch_alter_table("memory_cursors", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_memory_cursors_owner_id"), ["owner_id"], unique=False)

    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in _SQLITE_FTS:
            op.execute(statement)
    elif dialect == "postgresql":
        op.execute(
            "CREATE INDEX ix_memory_items_fts ON memory_items USING gin (to_tsvector('simple', search_text))"
        )
        op.execute("CREATE INDEX ix_messages_fts ON messages USING gin (to_tsvector('simple', content))")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for trigger in (
            "memory_items_fts_insert",
            "memory_items_fts_delete",
            "memory_items_fts_update",
            "messages_fts_insert",
        ):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        for index in ("memory_items_fts", "messages_fts"):
            op.execute(f"DROP TABLE IF EXISTS {index}")
    elif dialect == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_messages_fts")
        op.execute("DROP INDEX IF EXISTS ix_memory_items_fts")
    with op.batch_alter_table("memory_cursors", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_cursors_owner_id"))
    op.drop_table("memory_cursors")
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        batch_op.drop_index("ix_memory_items_owner_key")
        batch_op.drop_index("ix_memory_items_owner")
    op.drop_table("memory_items")
