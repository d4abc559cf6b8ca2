"""Embeddings for rows stored before dense recall was on.

Memory items and messages written while the `dense` extra was missing (or
`memory.dense` was off) have no vector, so dense recall cannot find them. This
pass embeds them in small batches, oldest first, and is safe to run at any time:
a row the offload job embeds meanwhile keeps its own vector. Messages the offload
has not reached yet are left to it. Run by `chorus memory reindex`, and in the
background when `chorus serve` starts with dense recall on.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.memory.dense import Embedder, embedded_text, to_blob
from bot.storage.memory_store import MemoryStore
from bot.storage.memory_vectors import UnembeddedMessage

# Rows embedded (and committed) together. In `chorus serve` each batch is one job on the
# embedding thread, so an offload's embedding waits for at most one batch (a few hundred
# ms); a turn's query has a thread of its own.
BACKFILL_BATCH = 16


@dataclass(frozen=True)
class BackfillResult:
    items: int
    messages: int

    def __add__(self, other: BackfillResult) -> BackfillResult:
        return BackfillResult(self.items + other.items, self.messages + other.messages)


@dataclass(frozen=True)
class Batch:
    """Rows read together: items (id, content), or messages the offload has passed."""

    items: list[tuple[int, str]]
    messages: list[UnembeddedMessage]

    def texts(self) -> list[str]:
        # Blank messages are never embedded (the offload skips them too).
        return [content for _, content in self.items] + [
            embedded_text(message.sender_name, message.content) for message in self.said()
        ]

    def said(self) -> list[UnembeddedMessage]:
        return [message for message in self.messages if message.content.strip()]


class Backfill:
    """One pass, items first, as steps that each touch one resource.

    `next_batch` and `write` are database work, `embed` is CPU work: `chorus serve`
    runs the first two on the database's thread (`bot.storage.boundary`) and the
    third on the embedding thread; `chorus memory reindex` runs all three in turn.
    """

    def __init__(self, store: MemoryStore, embedder: Embedder, batch: int = BACKFILL_BATCH) -> None:
        self.store = store
        self.embedder = embedder
        self.batch = batch
        self._items_done = False
        self._after = 0

    def next_batch(self) -> Batch | None:
        """The next rows without a vector, or None when the pass is over."""
        if not self._items_done:
            if items := self.store.items_without_vector(self._after, self.batch):
                self._after = items[-1][0]
                return Batch(items, [])
            self._items_done, self._after = True, 0
        if messages := self.store.messages_without_vector(self._after, self.batch):
            self._after = messages[-1].id
            return Batch([], messages)
        return None

    def embed(self, batch: Batch) -> list[bytes]:
        texts = batch.texts()
        return [to_blob(vector) for vector in self.embedder.embed(texts)] if texts else []

    def write(self, batch: Batch, vectors: list[bytes]) -> BackfillResult:
        said = batch.said()
        items = list(zip((id for id, _ in batch.items), vectors, strict=False))
        messages = list(zip(said, vectors[len(items) :], strict=True))
        if items or messages:
            self.store.store_vectors(items, messages)
        return BackfillResult(len(items), len(messages))


def backfill_embeddings(
    store: MemoryStore, embedder: Embedder, batch: int = BACKFILL_BATCH
) -> BackfillResult:
    """Embed every item and every offloaded message that has no vector yet."""
    backfill = Backfill(store, embedder, batch)
    total = BackfillResult(0, 0)
    while (found := backfill.next_batch()) is not None:
        total += backfill.write(found, backfill.embed(found))
    return total
