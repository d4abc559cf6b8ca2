"""memory items keep their source range and date; sender names and dates in the message index; embeddings

Revision ID: 0004_recall
Revises: 0003_memory

Memory items gain the last seq of the messages they came from, the time those
messages were said, and an optional sentence embedding; stored messages get an
embeddings table. The full-text rows of every stored message and item are
rebuilt: a message is now found by its sender's display name and by the dates it
was said and talks about, and stop words come from full per-language lists.
On PostgreSQL the message index expression takes in the sender's name.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import sqlalchemy as sa
import sqlmodel
from alembic import op

from bot.storage.index_text import item_index_text, message_index_text

revision = "0004_recall"
down_revision = "0003_memory"
branch_labels = None
depends_on = None

_FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
_BATCH = 2000


def upgrade() -> None:
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("source_last_seq", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("said_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("embedding", sa.LargeBinary(), nullable=True))
    op.create_table(
        "message_embeddings",
        sa.Column("message_id", sa.Integer(), nullable=False),
        sa.Column("owner_kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("owner_id", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["message_id"], ["messages.id"]),
        sa.PrimaryKeyConstraint("message_id"),
    )
    with op.batch_alter_table("message_embeddings", schema=None) as batch_op:
        batch_op.create_index(
            "ix_message_embeddings_owner", ["owner_kind", "owner_id", "message_id"], unique=False
        )
    bind = op.get_bind()
    # Items written before now: one message each, said when that message was.
    op.execute(
        "UPDATE memory_items SET source_last_seq = source_seq, said_at = (SELECT m.created_at "
        "FROM messages m WHERE m.session_id = memory_items.session_id AND m.seq = memory_items.source_seq)"
    )
    _rebuild_item_rows(bind)
    if bind.dialect.name == "sqlite":
        op.execute("DROP TABLE messages_fts")
        op.execute(
            "CREATE VIRTUAL TABLE messages_fts USING fts5(owner, content, content='', "
            f"tokenize='{_FTS_TOKENIZER}')"
        )
        _rebuild_message_rows(bind)
    elif bind.dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_messages_fts")
        op.execute(
            "CREATE INDEX ix_messages_fts ON messages USING gin "
            "(to_tsvector('simple', coalesce(sender_name, '') || ' ' || content))"
        )


def _batches(bind: Any, statement: str) -> Iterator[list[Any]]:
    last = 0
    while True:
        rows = bind.execute(sa.text(statement), {"after": last, "batch": _BATCH}).all()
        if not rows:
            return
        yield rows
        last = rows[-1].id


def _rebuild_item_rows(bind: Any) -> None:
    for rows in _batches(
        bind, "SELECT id, content, said_at FROM memory_items WHERE id > :after ORDER BY id LIMIT :batch"
    ):
        bind.execute(
            sa.text("UPDATE memory_items SET search_text = :text WHERE id = :id"),
            [{"id": row.id, "text": item_index_text(row.content, _moment(row.said_at))} for row in rows],
        )


def _rebuild_message_rows(bind: Any) -> None:
    statement = (
        "SELECT m.id, m.sender_name, m.content, m.created_at, s.owner_kind, s.owner_id FROM messages m "
        "JOIN sessions s ON s.id = m.session_id WHERE m.role != 'system' AND m.id > :after "
        "ORDER BY m.id LIMIT :batch"
    )
    for rows in _batches(bind, statement):
        bind.execute(
            sa.text("INSERT INTO messages_fts(rowid, owner, content) VALUES (:id, hex(:owner), :text)"),
            [
                {
                    "id": row.id,
                    "owner": f"{row.owner_kind}:{row.owner_id}",
                    "text": message_index_text(row.sender_name, row.content, _moment(row.created_at)),
                }
                for row in rows
            ],
        )


def _moment(value: Any) -> datetime | None:
    # SQLite hands back text from a raw query, PostgreSQL a datetime.
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_messages_fts")
        op.execute("CREATE INDEX ix_messages_fts ON messages USING gin (to_tsvector('simple', content))")
    with op.batch_alter_table("message_embeddings", schema=None) as batch_op:
        batch_op.drop_index("ix_message_embeddings_owner")
    op.drop_table("message_embeddings")
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        batch_op.drop_column("embedding")
        batch_op.drop_column("said_at")
        batch_op.drop_column("source_last_seq")
