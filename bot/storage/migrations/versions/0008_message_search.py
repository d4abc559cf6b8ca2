"""PostgreSQL: messages are searched by the same index text as on SQLite

Revision ID: 0008_message_search
Revises: 0007_jobs

On PostgreSQL the message index was an expression over the sender's name and the
raw text: CJK text (no spaces) became one token per run of characters, so a
search by character found nothing, and the date terms SQLite indexes (the day a
message was said, the days its "yesterday" or "last week" point at) were not
there at all. Each message now gets a row in `messages_fts` holding
`message_index_text` — the text SQLite's index is given — under a GIN index, and
the old expression index is dropped. SQLite is unchanged.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from bot.storage.index_text import message_index_text

revision = "0008_message_search"
down_revision = "0007_jobs"
branch_labels = None
depends_on = None

_BATCH = 2000


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute(
        "CREATE TABLE messages_fts (message_id INTEGER PRIMARY KEY REFERENCES messages (id), "
        "search_text TEXT NOT NULL)"
    )
    last = 0
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT id, sender_name, content, created_at FROM messages WHERE role != 'system' "
                "AND id > :after ORDER BY id LIMIT :batch"
            ),
            {"after": last, "batch": _BATCH},
        ).all()
        if not rows:
            break
        bind.execute(
            sa.text("INSERT INTO messages_fts (message_id, search_text) VALUES (:id, :text)"),
            [{"id": row.id, "text": _index_text(row)} for row in rows],
        )
        last = rows[-1].id
    op.execute(
        "CREATE INDEX ix_messages_fts_search ON messages_fts USING gin (to_tsvector('simple', search_text))"
    )
    op.execute("DROP INDEX IF EXISTS ix_messages_fts")


def _index_text(row: Any) -> str:
    return message_index_text(row.sender_name, row.content, _moment(row.created_at))


def _moment(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "CREATE INDEX ix_messages_fts ON messages USING gin "
        "(to_tsvector('simple', coalesce(sender_name, '') || ' ' || content))"
    )
    op.execute("DROP TABLE messages_fts")
