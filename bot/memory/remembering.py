"""Items the model asks to keep (the `remember` tool): taken as if written in a `<memory>` tag.

Tag lines are already distilled, so they skip the distiller and are stored at once,
labelled and classified the way tag lines are; an item the owner already has counts
as one more mention of it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

from bot.memory.dense import Embedder, off_loop, to_blob
from bot.memory.offload import with_resolved_dates
from bot.memory.tags import items_from_tag
from bot.search_terms import content_key
from bot.storage.boundary import boundary_for
from bot.storage.index_text import item_index_text
from bot.storage.memory_items import CommitCounts, NewMemoryItem
from bot.storage.memory_store import MemoryStore
from bot.storage.models import ChatSession


@dataclass(frozen=True)
class Remembered:
    """What one `remember` stored: each line's kind and text, and how many were new."""

    items: tuple[tuple[str, str], ...]
    counts: CommitCounts


async def remember(
    store: MemoryStore,
    embedder: Embedder | None,
    session: ChatSession,
    text: str,
    *,
    seq: int | None,
    said_at: datetime | None,
) -> Remembered:
    """Store one item per line of `text` for the session's owner, dated `said_at`."""
    items = [
        NewMemoryItem(
            kind=item.kind,
            content=(content := with_resolved_dates(item.content, said_at)),
            search_text=item_index_text(content, said_at),
            content_key=content_key(item.content),
            importance=item.importance,
            source="tool",
            source_seq=seq,
            source_last_seq=seq,
            said_at=said_at,
        )
        for item in items_from_tag(text, seq)
    ]
    if embedder is not None and items:
        vectors = await off_loop(embedder.embed, [item.content for item in items])
        items = [
            dataclasses.replace(item, embedding=to_blob(vector))
            for item, vector in zip(items, vectors, strict=True)
        ]
    counts = await boundary_for(store.database).run(store.add_items, session, items)
    return Remembered(tuple((item.kind, item.content) for item in items), counts)
