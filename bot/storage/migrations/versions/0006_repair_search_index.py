"""Repair the SQLite full-text indexes of databases migrated by an earlier 0003.

Revision ID: 0006_repair_search_index
Revises: 0005_deliveries
Create Date: 2026-11-30

Revision 0003 shipped in three shapes before it settled. A database migrated by an
earlier one still has what that shape created:

- the first shape indexed `memory_items` and `messages` through external-content
  FTS5 tables with insert/update/delete triggers and no owner column, so recall's
  owner-scoped queries cannot run against them;
- the second shape had the current tables plus a `messages_fts_insert` trigger,
  while `Store.append` now writes each message's index row itself: every message
  would be indexed twice.

This revision drops whatever an earlier shape left and rebuilds the affected
index in the current shape, the message index with the same search text the
store writes. A database migrated by the current 0003 is left as it is.
PostgreSQL's 0003 never changed, so there is nothing to repair there.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from bot.storage.index_text import message_index_text, owner_token

revision = "0006_repair_search_index"
down_revision = "0005_deliveries"
branch_labels = None
depends_on = None

_FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
# The same owner token as 0003 (and `bot.storage.index_text.owner_token`): the hex of "kind:id".
_OWNER_TOKEN = "hex({kind} || ':' || {id})"

# Triggers any shape of 0003 created. The current shape keeps the three on memory_items.
_OLD_TRIGGERS = (
    "memory_items_fts_insert",
    "memory_items_fts_delete",
    "memory_items_fts_update",
    "messages_fts_insert",
    "messages_fts_delete",
    "messages_fts_update",
)

_MEMORY_ITEMS_FTS = [
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
    "INSERT INTO memory_items_fts(rowid, owner, search_text) SELECT id, "
    + _OWNER_TOKEN.format(kind="owner_kind", id="owner_id")
    + ", search_text FROM memory_items",
]
_MESSAGES_FTS = (
    f"CREATE VIRTUAL TABLE messages_fts USING fts5(owner, content, content='', tokenize='{_FTS_TOKENIZER}')"
)
_MESSAGES_TO_INDEX = sa.text(
    "SELECT m.id, s.owner_kind, s.owner_id, m.sender_name, m.content, m.created_at FROM messages m "
    "JOIN sessions s ON s.id = m.session_id WHERE m.role != 'system' ORDER BY m.id"
)
_INDEX_MESSAGE = sa.text("INSERT INTO messages_fts(rowid, owner, content) VALUES (:id, :owner, :content)")


def _columns(table: str) -> list[str]:
    rows = op.get_bind().execute(sa.text(f"SELECT name FROM pragma_table_info('{table}')")).all()
    return [row[0] for row in rows]


def _has_current_shape(table: str, column: str) -> bool:
    # The first shape's tables had a single indexed column and no owner.
    return _columns(table) == ["owner", column]


def _triggers() -> set[str]:
    rows = op.get_bind().execute(sa.text("SELECT name FROM sqlite_master WHERE type = 'trigger'")).all()
    return {row[0] for row in rows}


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    memory_current = _has_current_shape("memory_items_fts", "search_text")
    messages_current = _has_current_shape("messages_fts", "content") and not (
        _triggers() & {"messages_fts_insert", "messages_fts_delete", "messages_fts_update"}
    )
    for trigger in _OLD_TRIGGERS:
        if memory_current and trigger.startswith("memory_items_"):
            continue
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    if not memory_current:
        op.execute("DROP TABLE IF EXISTS memory_items_fts")
        for statement in _MEMORY_ITEMS_FTS:
            op.execute(statement)
    if not messages_current:
        # Indexed twice (trigger and store) or in the old shape: index every message once, afresh.
        op.execute("DROP TABLE IF EXISTS messages_fts")
        op.execute(_MESSAGES_FTS)
        bind = op.get_bind()
        for row in bind.execute(_MESSAGES_TO_INDEX).all():
            text = message_index_text(row.sender_name, row.content, _moment(row.created_at))
            owner = owner_token(row.owner_kind, row.owner_id)
            bind.execute(_INDEX_MESSAGE, {"id": row.id, "owner": owner, "content": text})


def _moment(value: Any) -> datetime | None:
    # SQLite hands back text from a raw query.
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def downgrade() -> None:
    # The repaired indexes are what 0003 creates today; there is no broken state to go back to.
    pass
