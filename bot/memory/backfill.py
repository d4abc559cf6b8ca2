"""Embeddings for rows stored before dense recall was on.

Memory items and messages written while the `dense` extra was missing (or
`memory.dense` was off) have no vector, so dense recall cannot find them. This
pass embeds them in small batches, oldest first, and is safe to run at any time:
a row the offload job embeds meanwhile keeps its own vector. Messages the offload
has not reached yet are left to it. Run by `chorus memory reindex`, and in the
background when `chorus serve` starts with dense recall on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from bot.memory.dense import Embedder, embedded_text, to_blob
from bot.storage.memory_store import MemoryStore

# Rows embedded (and committed) together. In `chorus serve` each batch is one job on the
# embedding thread, so a turn's query waits for at most one batch (a few hundred ms).
BACKFILL_BATCH = 16


@dataclass(frozen=True)
class BackfillResult:
    items: int
    messages: int

    def __add__(self, other: BackfillResult) -> BackfillResult:
        return BackfillResult(self.items + other.items, self.messages + other.messages)


def backfill_steps(
    store: MemoryStore, embedder: Embedder, batch: int = BACKFILL_BATCH
) -> Iterator[BackfillResult]:
    """Embed one batch per step, items first, and say what each step embedded."""
    after = 0
    while rows := store.items_without_vector(after, batch):
        vectors = embedder.embed([content for _, content in rows])
        store.store_vectors(
            [(row[0], to_blob(vector)) for row, vector in zip(rows, vectors, strict=True)], []
        )
        after = rows[-1][0]
        yield BackfillResult(len(rows), 0)
    after = 0
    while found := store.messages_without_vector(after, batch):
        # Blank messages are never embedded (the offload skips them too).
        said = [message for message in found if message.content.strip()]
        if said:
            vectors = embedder.embed([embedded_text(m.sender_name, m.content) for m in said])
            store.store_vectors([], [(m, to_blob(v)) for m, v in zip(said, vectors, strict=True)])
        after = found[-1].id
        yield BackfillResult(0, len(said))


def backfill_embeddings(
    store: MemoryStore, embedder: Embedder, batch: int = BACKFILL_BATCH
) -> BackfillResult:
    """Embed every item and every offloaded message that has no vector yet."""
    total = BackfillResult(0, 0)
    for step in backfill_steps(store, embedder, batch):
        total += step
    return total
