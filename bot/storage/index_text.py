"""What the full-text index stores for a message or a memory item.

Normalised words (`search_text`), plus the sender's display name for a message,
plus date terms: the day it was said and the days its relative phrases point at
(see `bot.search_dates`). Written by `Store.append`, the offloader, and the
migration that rebuilt older rows, so all three index the same way.
"""

from __future__ import annotations

from datetime import datetime

from bot.search_dates import message_date_terms
from bot.search_terms import search_text


def message_index_text(sender_name: str | None, content: str, said_at: datetime | None) -> str:
    words = search_text(f"{sender_name or ''} {content}")
    return _with_dates(words, content, said_at)


def item_index_text(content: str, said_at: datetime | None) -> str:
    return _with_dates(search_text(content), content, said_at)


def _with_dates(words: str, content: str, said_at: datetime | None) -> str:
    if said_at is None:
        return words
    return f"{words} {' '.join(message_date_terms(content, said_at.date()))}"
