"""Memory items: what the offload distilled (or the `remember` tool was told), per owner.

A part of `MemoryStore`. An item the owner already has (the same content key) is not
stored twice: it counts as one more mention. Removing an item changes the owner's
vectors, which dense recall is told of (`VECTOR_CHANGES`).

A new item may replace older ones (the model named them, or it states the same slot of
the same subject: see `bot.memory.slots`): they stay stored as history, marked with the
item that replaced them and when they stopped holding, and leave the snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import bindparam, delete, func, or_
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlmodel import Session, col, select

from bot.storage.database import open_session
from bot.storage.memory_models import MemoryItem
from bot.storage.memory_vectors import VECTOR_CHANGES
from bot.storage.models import Account, ChatSession, utcnow
from bot.storage.owners import Owner

# Read on every turn, as ORM rows: the ORM loads a row in about a fifth of the time that
# building a model from a Core row takes (`MemoryItem(**row)` validates every field).
# Only what holds now: a replaced item is history (`history_items`).
NEWEST_ITEMS = (
    select(MemoryItem)
    .where(
        col(MemoryItem.owner_kind) == bindparam("owner_kind"),
        col(MemoryItem.owner_id) == bindparam("owner_id"),
        col(MemoryItem.superseded_by).is_(None),
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
    # Whom it is about, who said it (person id and name), and what it states of its subject.
    about: str | None = None
    said_by: str | None = None
    said_by_name: str | None = None
    slot: str | None = None
    # Stored items of the owner the distiller said this one replaces.
    replaces: tuple[int, ...] = ()


@dataclass(frozen=True)
class CommitCounts:
    written: int
    merged: int
    superseded: int = 0


class MemoryItems:
    """Reads and writes of the owner's items (a part of `MemoryStore`)."""

    database: DatabaseEngine

    def recent_items(self, owner: Owner, limit: int) -> list[MemoryItem]:
        """The owner's most recently written or reinforced items, newest first."""
        with open_session(self.database) as db:
            return list(
                db.exec(NEWEST_ITEMS, params={"owner_kind": owner.kind, "owner_id": owner.id, "limit": limit})
            )

    def items_around(
        self, owner: Owner, moment: datetime, limit: int
    ) -> tuple[list[MemoryItem], list[MemoryItem]]:
        """The owner's newest holding items stored up to `moment`, and those stored after it.

        Each list is newest first, by when the item was first stored (a repeat that
        reinforces an item does not move it), `limit` items at most.
        """
        holding = (
            col(MemoryItem.owner_kind) == owner.kind,
            col(MemoryItem.owner_id) == owner.id,
            col(MemoryItem.superseded_by).is_(None),
        )
        newest = (col(MemoryItem.created_at).desc(), col(MemoryItem.id).desc())
        with open_session(self.database) as db:
            before = db.exec(
                select(MemoryItem)
                .where(*holding, col(MemoryItem.created_at) <= moment)
                .order_by(*newest)
                .limit(limit)
            )
            after = db.exec(
                select(MemoryItem)
                .where(*holding, col(MemoryItem.created_at) > moment)
                .order_by(*newest)
                .limit(limit)
            )
            return list(before), list(after)

    def history_items(self, owner: Owner, limit: int) -> list[MemoryItem]:
        """The owner's items that a newer one replaced, the most recently replaced first."""
        with open_session(self.database) as db:
            return list(
                db.exec(
                    select(MemoryItem)
                    .where(
                        MemoryItem.owner_kind == owner.kind,
                        MemoryItem.owner_id == owner.id,
                        col(MemoryItem.superseded_by).is_not(None),
                    )
                    .order_by(col(MemoryItem.valid_until).desc(), col(MemoryItem.id).desc())
                    .limit(limit)
                )
            )

    def person_items(self, owner: Owner, person_id: str, name: str | None) -> list[MemoryItem]:
        """The owner's items that `person_id` said or that are about them (by `name`), oldest first."""
        said_or_about = [col(MemoryItem.said_by) == person_id]
        if name:
            said_or_about.append(func.lower(col(MemoryItem.about)) == name.lower())
        with open_session(self.database) as db:
            return list(
                db.exec(
                    select(MemoryItem)
                    .where(
                        MemoryItem.owner_kind == owner.kind,
                        MemoryItem.owner_id == owner.id,
                        or_(*said_or_about),
                    )
                    .order_by(col(MemoryItem.id))
                )
            )

    def items_said_by(self, person_id: str) -> list[MemoryItem]:
        """Every item `person_id` said, in any owner's memory (their groups included), oldest first."""
        with open_session(self.database) as db:
            return list(
                db.exec(
                    select(MemoryItem).where(MemoryItem.said_by == person_id).order_by(col(MemoryItem.id))
                )
            )

    def person_ids(self, sender_ids: Sequence[str]) -> dict[str, str]:
        """The person behind each sender ("lane:platform user id") that has an account."""
        wanted = {sender.partition(":")[::2] for sender in sender_ids if ":" in sender}
        if not wanted:
            return {}
        lanes = {lane for lane, _ in wanted}
        users = {user for _, user in wanted}
        with open_session(self.database) as db:
            accounts = db.exec(
                select(Account).where(col(Account.lane).in_(lanes), col(Account.platform_user_id).in_(users))
            ).all()
        return {
            f"{account.lane}:{account.platform_user_id}": account.person_id
            for account in accounts
            if (account.lane, account.platform_user_id) in wanted
        }

    def items_about(self, names: set[str]) -> list[MemoryItem]:
        """Every group item about a person of one of these (lower-cased) names, oldest first."""
        if not names:
            return []
        with open_session(self.database) as db:
            return list(
                db.exec(
                    select(MemoryItem)
                    .where(MemoryItem.owner_kind == "group", func.lower(col(MemoryItem.about)).in_(names))
                    .order_by(col(MemoryItem.id))
                )
            )

    def get_item(self, owner: Owner, item_id: int) -> MemoryItem | None:
        with open_session(self.database) as db:
            item = db.get(MemoryItem, item_id)
        return (
            item if item is not None and (item.owner_kind, item.owner_id) == (owner.kind, owner.id) else None
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

    def count_items(self, owner: Owner, *, current: bool | None = None) -> int:
        """How many items the owner has: all of them, or (`current`) only those that hold / were replaced."""
        replaced = col(MemoryItem.superseded_by)
        held = [] if current is None else [replaced.is_(None) if current else replaced.is_not(None)]
        with open_session(self.database) as db:
            return int(
                db.exec(
                    select(func.count())
                    .select_from(MemoryItem)
                    .where(MemoryItem.owner_kind == owner.kind, MemoryItem.owner_id == owner.id, *held)
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
            counts = store_items(db, owner, session.id, items, utcnow())
            db.commit()
        return counts


def store_items(
    db: Session, owner: Owner, session_id: str, items: Sequence[NewMemoryItem], now: datetime
) -> CommitCounts:
    """Insert `items`, each one the owner already has (same content key) counted as a mention,
    and mark the items each of them replaces."""
    written = merged = superseded = 0
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
            if existing.superseded_by is not None and (item.slot or item.replaces):
                # Said again after something else replaced it ("back in Leeds"): it holds again.
                existing.superseded_by = existing.valid_until = None
            db.add(existing)
            db.flush()
            merged += 1
            if existing.superseded_by is None:
                superseded += supersede(db, owner, existing, item, now)
            continue
        stored = MemoryItem(
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
            about=item.about,
            said_by=item.said_by,
            said_by_name=item.said_by_name,
            slot=item.slot,
        )
        db.add(stored)
        written += 1
        # Later items of the same batch must see this one for merging, and it needs its id.
        db.flush()
        superseded += supersede(db, owner, stored, item, now)
    return CommitCounts(written=written, merged=merged, superseded=superseded)


def as_utc(moment: datetime) -> datetime:
    # SQLite gives stored datetimes back without their zone; they were written in UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def supersede(db: Session, owner: Owner, holding: MemoryItem, item: NewMemoryItem, now: datetime) -> int:
    """Mark the owner's items that `holding` replaces: the ones the distiller named, and the
    current ones of the same slot said no later than it. Returns how many it marked."""
    if not item.replaces and not item.slot:
        return 0
    named = col(MemoryItem.id).in_(item.replaces) if item.replaces else None
    # A slot is "subject|name=value": the same subject and name with another value.
    same_slot = (
        col(MemoryItem.slot).startswith(item.slot.split("=", 1)[0] + "=", autoescape=True)
        & (col(MemoryItem.slot) != item.slot)
        if item.slot
        else None
    )
    which = [condition for condition in (named, same_slot) if condition is not None]
    older = db.exec(
        select(MemoryItem).where(
            MemoryItem.owner_kind == owner.kind,
            MemoryItem.owner_id == owner.id,
            col(MemoryItem.superseded_by).is_(None),
            col(MemoryItem.id) != holding.id,
            or_(*which),
        )
    ).all()
    since = item.said_at or holding.said_at or now
    marked = 0
    for old in older:
        if old.id not in item.replaces and old.said_at is not None and as_utc(old.said_at) > as_utc(since):
            continue  # a slot's newer statement is not replaced by an older one arriving late
        old.superseded_by = holding.id
        old.valid_until = since
        db.add(old)
        marked += 1
    if marked:
        db.flush()
    return marked
