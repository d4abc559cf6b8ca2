"""The vectors of dense recall: embeddings of memory items and of offloaded messages.

A part of `MemoryStore`. The offload job embeds what it distils (see
`MemoryCursors.commit_offload`); a backfill embeds what was stored before dense recall
was on. Dense recall caches each owner's vectors and asks again only when they changed
(`VECTOR_CHANGES`).
"""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import Engine as DatabaseEngine

from bot.storage.memory_search import IS_SAID
from bot.storage.owners import Owner


@dataclass(frozen=True)
class VectorRow:
    """A stored embedding with what recall needs to place its row without reading it."""

    id: int
    vector: bytes
    session_id: str
    seq: int | None
    last_seq: int | None


@dataclass(frozen=True)
class UnembeddedMessage:
    id: int
    sender_name: str | None
    content: str
    owner: Owner


class VectorChanges:
    """How often this process changed each owner's stored vectors, per database.

    Dense recall keeps each owner's vectors in memory and asks the database again only
    when this process wrote to them (or, for other processes' writes, after a while):
    a turn then reads no vector counts at all. `ALL` counts changes whose owners are not
    known (a backfill, a merge of two persons).
    """

    ALL = "*"

    def __init__(self) -> None:
        self._counts: weakref.WeakKeyDictionary[DatabaseEngine, dict[tuple[str, str], int]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def note(self, database: DatabaseEngine, owner: Owner | None) -> None:
        key = (owner.kind, owner.id) if owner is not None else (self.ALL, self.ALL)
        with self._lock:
            counts = self._counts.setdefault(database, defaultdict(int))
            counts[key] += 1

    def generation(self, database: DatabaseEngine, owner: Owner) -> tuple[int, int]:
        with self._lock:
            counts = self._counts.get(database, {})
            return counts.get((owner.kind, owner.id), 0), counts.get((self.ALL, self.ALL), 0)


VECTOR_CHANGES = VectorChanges()


class MemoryVectors:
    """Reads and writes of stored vectors (a part of `MemoryStore`)."""

    database: DatabaseEngine

    def vector_counts(self, owner: Owner) -> dict[str, tuple[int, int]]:
        """Per source, how many of the owner's rows have a vector and the highest id among them.

        Read on every dense search to tell whether a cached matrix is still whole: rows
        are added in id order by the offload job, but a backfill, a removed item or a
        merged person changes the count without (only) adding higher ids.
        """
        with self.database.connect() as connection:
            rows = connection.execute(_VECTOR_COUNTS, {"owner_kind": owner.kind, "owner_id": owner.id}).all()
        return {str(row[0]): (int(row[1]), int(row[2])) for row in rows}

    def vectors_after(self, owner: Owner, source: str, after_id: int) -> list[VectorRow]:
        """The owner's items or messages with a vector and an id above `after_id`, in id order."""
        sql = _ITEM_VECTORS if source == "memory" else _MESSAGE_VECTORS
        with self.database.connect() as connection:
            rows = connection.execute(
                sql, {"owner_kind": owner.kind, "owner_id": owner.id, "after": after_id}
            ).all()
        return [VectorRow(int(row[0]), bytes(row[1]), row[2], row[3], row[4]) for row in rows]

    def items_without_vector(self, after_id: int, limit: int) -> list[tuple[int, str]]:
        """(id, content) of items with no embedding and an id above `after_id`, in id order."""
        with self.database.connect() as connection:
            rows = connection.execute(_ITEMS_WITHOUT_VECTOR, {"after": after_id, "limit": limit}).all()
        return [(int(row[0]), str(row[1])) for row in rows]

    def messages_without_vector(self, after_id: int, limit: int) -> list[UnembeddedMessage]:
        """Messages the offload has passed (at or before their session's cursor) with no embedding.

        Messages after the cursor are left to the offload job, which embeds them with
        the rest of their chunk. In id order, from above `after_id`.
        """
        with self.database.connect() as connection:
            rows = connection.execute(_MESSAGES_WITHOUT_VECTOR, {"after": after_id, "limit": limit}).all()
        return [UnembeddedMessage(int(row[0]), row[1], str(row[2]), Owner(row[3], row[4])) for row in rows]

    def store_vectors(
        self, items: Sequence[tuple[int, bytes]], messages: Sequence[tuple[UnembeddedMessage, bytes]]
    ) -> None:
        """Write embeddings computed after the fact; rows embedded meanwhile keep theirs."""
        with self.database.begin() as connection:
            if items:
                connection.execute(_SET_ITEM_VECTOR, [{"id": id, "vector": vector} for id, vector in items])
            if messages:
                connection.execute(
                    _ADD_MESSAGE_VECTOR,
                    [
                        {
                            "id": message.id,
                            "owner_kind": message.owner.kind,
                            "owner_id": message.owner.id,
                            "vector": vector,
                        }
                        for message, vector in messages
                    ],
                )
        VECTOR_CHANGES.note(self.database, None)

    def vector_generation(self, owner: Owner) -> tuple[int, int]:
        """Changes this process made to the owner's vectors (see `VectorChanges`)."""
        return VECTOR_CHANGES.generation(self.database, owner)


_ITEM_VECTORS = text(
    "SELECT id, embedding, session_id, source_seq, source_last_seq FROM memory_items "
    "WHERE owner_kind = :owner_kind AND owner_id = :owner_id AND embedding IS NOT NULL AND id > :after "
    "ORDER BY id"
)
_MESSAGE_VECTORS = text(
    "SELECT e.message_id, e.vector, g.session_id, g.seq, g.seq FROM message_embeddings e "
    "JOIN messages g ON g.id = e.message_id WHERE e.owner_kind = :owner_kind AND e.owner_id = :owner_id "
    "AND e.message_id > :after ORDER BY e.message_id"
)
_VECTOR_COUNTS = text(
    "SELECT 'memory', count(*), coalesce(max(id), 0) FROM memory_items "
    "WHERE owner_kind = :owner_kind AND owner_id = :owner_id AND embedding IS NOT NULL "
    "UNION ALL SELECT 'message', count(*), coalesce(max(message_id), 0) FROM message_embeddings "
    "WHERE owner_kind = :owner_kind AND owner_id = :owner_id"
)
_ITEMS_WITHOUT_VECTOR = text(
    "SELECT id, content FROM memory_items WHERE embedding IS NULL AND id > :after ORDER BY id LIMIT :limit"
)
_MESSAGES_WITHOUT_VECTOR = text(
    "SELECT g.id, g.sender_name, g.content, s.owner_kind, s.owner_id FROM messages g "
    "JOIN sessions s ON s.id = g.session_id "
    "JOIN memory_cursors c ON c.session_id = g.session_id AND g.seq <= c.last_seq "
    "LEFT JOIN message_embeddings e ON e.message_id = g.id "
    f"WHERE e.message_id IS NULL AND {IS_SAID} AND g.id > :after ORDER BY g.id LIMIT :limit"
)
_SET_ITEM_VECTOR = text("UPDATE memory_items SET embedding = :vector WHERE id = :id AND embedding IS NULL")
_ADD_MESSAGE_VECTOR = text(
    "INSERT INTO message_embeddings (message_id, owner_kind, owner_id, vector) "
    "VALUES (:id, :owner_kind, :owner_id, :vector) ON CONFLICT (message_id) DO NOTHING"
)
