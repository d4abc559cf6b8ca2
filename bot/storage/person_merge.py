"""Joining two persons into one when an account redeems another's link code.

The person who showed the code keeps their id; everything of the other person moves over in the
caller's transaction: accounts, unused link codes, private sessions (with their search rows),
memory items and offload cursors. The conversation with the most recent message continues; the
other stays stored under the person, so export and recall still reach it. An item both persons
remember is kept once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table, delete, func, update
from sqlalchemy import select as sa_select
from sqlmodel import Session, SQLModel, col, select

import bot.storage.tables  # noqa: F401  (every table in the metadata, for _owned_tables)
from bot.search_terms import jaccard, search_text, similarity_tokens
from bot.storage.index_text import INDEX_MESSAGE, UNINDEX_MESSAGE, owner_token
from bot.storage.memory_models import MemoryItem
from bot.storage.memory_vectors import VECTOR_CHANGES
from bot.storage.models import Account, ChatSession, LinkCode, Message, Person, table_of
from transcript.kinds import CONVERSATION_KINDS, SAID_KINDS

ITEMS = table_of(MemoryItem)
PERSON = "person"
# The messages search indexes and a session's activity counts: the conversation, not its events.
_IS_CONVERSATION = col(Message.kind).in_(sorted(CONVERSATION_KINDS))
# The messages the full-text index holds: what was said, not tool calls and results.
_IS_SAID = col(Message.kind).in_(sorted(SAID_KINDS))


@dataclass(frozen=True)
class PersonMerge:
    """What joining two persons did."""

    person_id: str
    # The private session every account of the person talks in from now on.
    continuing_session_id: str | None
    # The other person's active conversation when it lost to the continuing one; kept stored.
    set_aside_session_id: str | None
    items_moved: int
    items_merged: int


def merge_persons(db: Session, source_id: str, target_id: str, dedup_threshold: float) -> PersonMerge:
    """Move person `source_id` into `target_id`; the caller commits.

    `dedup_threshold` is memory's near-duplicate similarity: a source item at least that
    similar to a target item (or with the same content key) merges into it.
    """
    source = db.get(Person, source_id)
    target = db.get(Person, target_id)
    if source is None or target is None:
        raise LookupError(f"cannot merge person {source_id} into {target_id}: one of them is missing")
    continuing, set_aside = _continuing_session(db, target.active_session_id, source.active_session_id)
    sessions = list(
        db.exec(
            select(ChatSession.id).where(ChatSession.owner_kind == PERSON, ChatSession.owner_id == source_id)
        )
    )
    _reindex_messages(db, sessions, source_id, target_id)
    moved, merged = _merge_memory(db, source_id, target_id, dedup_threshold)
    for table in _owned_tables():
        db.execute(
            update(table)
            .where(table.c.owner_kind == PERSON, table.c.owner_id == source_id)
            .values(owner_id=target_id)
        )
    db.execute(update(Account).where(col(Account.person_id) == source_id).values(person_id=target_id))
    # A code the other person showed and nobody used yet now joins accounts to the merged person.
    db.execute(update(LinkCode).where(col(LinkCode.person_id) == source_id).values(person_id=target_id))
    db.execute(update(Person).where(col(Person.id) == target_id).values(active_session_id=continuing))
    db.execute(delete(Person).where(col(Person.id) == source_id))
    # Both persons' vectors moved: dense recall reads them again.
    VECTOR_CHANGES.note(db.get_bind(), None)  # type: ignore[arg-type]
    return PersonMerge(
        person_id=target_id,
        continuing_session_id=continuing,
        set_aside_session_id=set_aside,
        items_moved=moved,
        items_merged=merged,
    )


def _owned_tables() -> list[Table]:
    """Every table that records an owner: sessions, offload cursors, and any copy kept for speed.

    Found from the schema rather than listed, so a table that copies the owner next to its rows
    moves with the person without this module knowing it. Memory items move in `_merge_memory`.
    """
    return [
        table
        for table in SQLModel.metadata.sorted_tables
        if {"owner_kind", "owner_id"} <= set(table.c.keys()) and table is not ITEMS
    ]


def _continuing_session(
    db: Session, target_session: str | None, source_session: str | None
) -> tuple[str | None, str | None]:
    """(continuing, set aside): the session with the newest message continues.

    Only the conversation counts (`transcript.kinds`): commands are events, or the `/link CODE`
    just sent would always decide. On a tie, or when neither has messages, the code's person keeps theirs. A
    losing session without messages is not worth mentioning, so it is not reported as set aside.
    """
    if target_session is None or source_session is None or target_session == source_session:
        return target_session or source_session, None
    target_activity = _last_activity(db, target_session)
    source_activity = _last_activity(db, source_session)
    if source_activity > target_activity:
        return source_session, target_session if target_activity[0] else None
    return target_session, source_session if source_activity[0] else None


def _last_activity(db: Session, session_id: str) -> tuple[int, Any]:
    # (0, None) sorts before any (1, time): a session without messages never wins.
    newest = db.exec(
        select(func.max(Message.created_at)).where(Message.session_id == session_id, _IS_CONVERSATION)
    ).one()
    return (0, None) if newest is None else (1, newest)


def _reindex_messages(db: Session, session_ids: Sequence[str], source_id: str, target_id: str) -> None:
    """Re-tag the moved sessions' search rows (SQLite) with their new owner.

    The SQLite index is contentless and keyed by owner, so each row is deleted with the
    values it was written with (see `MessageStore.append`) and written again for the new owner.
    PostgreSQL searches the messages table itself and needs nothing.
    """
    if not session_ids or db.get_bind().dialect.name != "sqlite":
        return
    rows = db.exec(
        select(Message.id, Message.content).where(col(Message.session_id).in_(session_ids), _IS_SAID)
    ).all()
    if not rows:
        return
    old, new = owner_token(PERSON, source_id), owner_token(PERSON, target_id)
    texts = [(message_id, search_text(content)) for message_id, content in rows]
    db.execute(UNINDEX_MESSAGE, [{"id": i, "owner": old, "content": t} for i, t in texts])
    db.execute(INDEX_MESSAGE, [{"id": i, "owner": new, "content": t} for i, t in texts])


@dataclass
class _Item:
    id: int
    content_key: str
    tokens: frozenset[str]
    mentions: int
    importance: int
    updated_at: datetime


def _merge_memory(db: Session, source_id: str, target_id: str, threshold: float) -> tuple[int, int]:
    """(moved, merged): source items join the target's memory, duplicates fold into one item."""
    kept = _items(db, target_id)
    by_key = {item.content_key: item for item in kept}
    moved = merged = 0
    for item in _items(db, source_id):
        twin = by_key.get(item.content_key) or _most_similar(item, kept, threshold)
        if twin is None:
            moved += 1
            continue
        # The target's item stays; it takes on how often and how strongly both remembered it.
        twin.mentions += item.mentions
        twin.importance = max(twin.importance, item.importance)
        twin.updated_at = max(twin.updated_at, item.updated_at)
        db.execute(
            update(MemoryItem)
            .where(col(MemoryItem.id) == twin.id)
            .values(mentions=twin.mentions, importance=twin.importance, updated_at=twin.updated_at)
        )
        db.execute(delete(MemoryItem).where(col(MemoryItem.id) == item.id))
        merged += 1
    # Naming search_text in the SET makes SQLite's update trigger re-index the row under its new owner.
    db.execute(
        update(ITEMS)
        .where(ITEMS.c.owner_kind == PERSON, ITEMS.c.owner_id == source_id)
        .values(owner_id=target_id, search_text=ITEMS.c.search_text)
    )
    # What the source person said in groups is now the target's to list and forget.
    db.execute(update(ITEMS).where(ITEMS.c.said_by == source_id).values(said_by=target_id))
    return moved, merged


def _items(db: Session, owner_id: str) -> list[_Item]:
    rows = db.execute(
        sa_select(
            ITEMS.c.id,
            ITEMS.c.content_key,
            ITEMS.c.content,
            ITEMS.c.mentions,
            ITEMS.c.importance,
            ITEMS.c.updated_at,
        ).where(ITEMS.c.owner_kind == PERSON, ITEMS.c.owner_id == owner_id)
    ).all()
    return [
        _Item(
            id=row.id,
            content_key=row.content_key,
            tokens=similarity_tokens(row.content),
            mentions=row.mentions,
            importance=row.importance,
            updated_at=row.updated_at,
        )
        for row in rows
    ]


def _most_similar(item: _Item, candidates: Sequence[_Item], threshold: float) -> _Item | None:
    best: _Item | None = None
    best_score = threshold
    for candidate in candidates:
        score = jaccard(item.tokens, candidate.tokens)
        if score >= best_score:
            best, best_score = candidate, score
    return best
