"""What the full-text index stores for a message or a memory item, and the statements that write it.

Normalised words (`search_text`), plus the sender's display name for a message,
plus date terms: the day it was said and the days its relative phrases point at
(see `bot.search_dates`). Written by `MessageStore.append`, the offloader, a person
merge and the migration that rebuilt older rows, so all of them index the same way.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text

from bot.search_dates import message_date_terms
from bot.search_terms import search_text

# The full-text row of a message (SQLite; see migration 0003_memory).
INDEX_MESSAGE = text("INSERT INTO messages_fts(rowid, owner, content) VALUES (:id, :owner, :content)")
# The same index text on PostgreSQL, under a GIN index (see migration 0008_message_search); the
# owner is read from the session there, so a linked person's messages need no re-tagging.
INDEX_MESSAGE_POSTGRES = text("INSERT INTO messages_fts (message_id, search_text) VALUES (:id, :content)")
# The index keeps no copy of the text: a row is removed by repeating exactly what was written.
UNINDEX_MESSAGE = text(
    "INSERT INTO messages_fts(messages_fts, rowid, owner, content) VALUES ('delete', :id, :owner, :content)"
)


def owner_token(owner_kind: str, owner_id: str) -> str:
    """One index token naming a memory owner: the hex of "kind:id" (as the migration's SQL builds it)."""
    return f"{owner_kind}:{owner_id}".encode().hex().upper()


def message_index_text(sender_name: str | None, content: str, said_at: datetime | None) -> str:
    words = search_text(f"{sender_name or ''} {content}")
    return _with_dates(words, content, said_at)


def item_index_text(content: str, said_at: datetime | None) -> str:
    return _with_dates(search_text(content), content, said_at)


def _with_dates(words: str, content: str, said_at: datetime | None) -> str:
    if said_at is None:
        return words
    return f"{words} {' '.join(message_date_terms(content, said_at.date()))}"
