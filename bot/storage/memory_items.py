"""Memory items: what the offload distilled (or the `remember` tool was told), per owner.

A part of `MemoryStore`. An item the owner already has (the same content key) is not
stored twice: it counts as one more mention. Removing an item changes the owner's
vectors, which dense recall is told of (`VECTOR_CHANGES`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, delete, func
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlmodel import Session, col, select

from bot.storage.database import open_session
from bot.storage.memory_models import MemoryItem
from bot.storage.memory_vectors import VECTOR_CHANGES
from bot.storage.models import ChatSession, utcnow
from bot.storage.owners import Owner

# Read on every turn, as ORM rows: the ORM loads a row in about a fifth of the time that
# building a model from a Core row takes (`MemoryItem(**row)` validates every field).
NEWEST_ITEMS = (
    select(MemoryItem)
    .where(
        col(MemoryItem.owner_kind) == bindparam("owner_kind"),
        col(MemoryItem.owner_id) == bindparam("owner_id"),
    )
    .order_by(col(MemoryItem.updated_at).desc(), col(MemoryItem.id).desc())
    .limit(bindparam("limit"))
)


@dataclass(frozen=True)
class NewMemoryItem:
    kind: str
    content: str
    search_text: str
    content_key: str
    importance: int
    source: str
    source_seq: int | None
    source_last_seq: int | None = None
    said_at: datetime | None = None
    embedding: bytes | None = None


@dataclass(frozen=True)
class CommitCounts:
    written: int
    merged: int


class MemoryItems:
    """Reads and writes of the owner's items (a part of `MemoryStore`)."""

    database: DatabaseEngine

    def recent_items(self, owner: Owner, limit: int) -> list[MemoryItem]:
        """The owner's most recently written or reinforced items, newest first."""
        with open_session(self.database) as db:
            return list(
                db.exec(NEWEST_ITEMS, params={"owner_kind": owner.kind, "owner_id": owner.id, "limit": limit})
            )

    def all_items(self, owner: Owner) -> list[MemoryItem]:
        """Every item of the owner, oldest first (for export)."""
        with open_session(self.database) as db:
            return list(
                db.exec(
                    select(MemoryItem)
                    .where(MemoryItem.owner_kind == owner.kind, MemoryItem.owner_id == owner.id)
                    .order_by(col(MemoryItem.id))
                )
            )

    def count_items(self, owner: Owner) -> int:
        with open_session(self.database) as db:
            return int(
                db.exec(
                    select(func.count())
                    .select_from(MemoryItem)
                    .where(MemoryItem.owner_kind == owner.kind, MemoryItem.owner_id == owner.id)
                ).one()
            )

    def delete_item(self, owner: Owner, item_id: int) -> bool:
        """Remove one item; False when the owner has no item with that id."""
        with open_session(self.database) as db:
            removed = db.execute(
                delete(MemoryItem).where(
                    col(MemoryItem.id) == item_id,
                    col(MemoryItem.owner_kind) == owner.kind,
                    col(MemoryItem.owner_id) == owner.id,
                )
            )
            db.commit()
        VECTOR_CHANGES.note(self.database, owner)
        return bool(removed.rowcount)  # type: ignore[attr-defined]

    def add_items(self, session: ChatSession, items: Sequence[NewMemoryItem]) -> CommitCounts:
        """Store items written outside an offload (the `remember` tool); the cursor stays."""
        with open_session(self.database) as db:
            owner = Owner.of(db.get(ChatSession, session.id) or session)
            written, merged = store_items(db, owner, session.id, items, utcnow())
            db.commit()
        return CommitCounts(written=written, merged=merged)


def store_items(
    db: Session, owner: Owner, session_id: str, items: Sequence[NewMemoryItem], now: datetime
) -> tuple[int, int]:
    """Insert `items`, each one the owner already has (same content key) counted as a mention."""
    written = merged = 0
    for item in items:
        existing = db.exec(
            select(MemoryItem).where(
                MemoryItem.owner_kind == owner.kind,
                MemoryItem.owner_id == owner.id,
                MemoryItem.content_key == item.content_key,
            )
        ).first()
        if existing is not None:
            existing.mentions += 1
            existing.importance = max(existing.importance, item.importance)
            existing.updated_at = now
            db.add(existing)
            merged += 1
            continue
        db.add(
            MemoryItem(
                owner_kind=owner.kind,
                owner_id=owner.id,
                session_id=session_id,
                source_seq=item.source_seq,
                source_last_seq=item.source_last_seq,
                said_at=item.said_at,
                embedding=item.embedding,
                kind=item.kind,
                content=item.content,
                search_text=item.search_text,
                content_key=item.content_key,
                importance=item.importance,
                source=item.source,
                created_at=now,
                updated_at=now,
            )
        )
        written += 1
        # Later items of the same batch must see this one for merging.
        db.flush()
    return written, merged
