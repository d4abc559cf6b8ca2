"""Embeddings for rows stored before dense recall was on.

Memory items and messages written while the `dense` extra was missing (or
`memory.dense` was off) have no vector, so dense recall cannot find them. This
pass embeds them in batches, oldest first, and is safe to run at any time: a row
the offload job embeds meanwhile keeps its own vector. Messages the offload has
not reached yet are left to it. Run by `chorus memory reindex`, and in the
background when `chorus serve` starts with dense recall on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.memory.dense import Embedder, embedded_text, to_blob
from bot.storage.memory_store import MemoryStore

# Rows embedded (and committed) together: small enough that a pass interrupted at
# shutdown loses little, large enough that the encoder batches well.
BACKFILL_BATCH = 64


@dataclass(frozen=True)
class BackfillResult:
    items: int
    messages: int


def backfill_embeddings(
    store: MemoryStore,
    embedder: Embedder,
    batch: int = BACKFILL_BATCH,
    stop: Callable[[], bool] = lambda: False,
) -> BackfillResult:
    """Embed every item and every offloaded message that has no vector yet.

    `stop` is asked between batches: a pass stopped early leaves the rest for the next.
    """
    items = messages = 0
    after = 0
    while not stop() and (rows := store.items_without_vector(after, batch)):
        vectors = embedder.embed([content for _, content in rows])
        embedded = [(row[0], to_blob(vector)) for row, vector in zip(rows, vectors, strict=True)]
        store.store_vectors(embedded, [])
        items += len(rows)
        after = rows[-1][0]
    after = 0
    while not stop() and (found := store.messages_without_vector(after, batch)):
        # Blank messages are never embedded (the offload skips them too).
        said = [message for message in found if message.content.strip()]
        if said:
            vectors = embedder.embed([embedded_text(m.sender_name, m.content) for m in said])
            store.store_vectors([], [(m, to_blob(v)) for m, v in zip(said, vectors, strict=True)])
        messages += len(said)
        after = found[-1].id
    return BackfillResult(items, messages)
