"""Reads and writes of long-term memory: items, offload cursors and full-text recall.

Every query is scoped by owner (kind and id), so a person's private memory and a
group's never meet. Items and the cursor that covers them commit in one
transaction: either both are stored or neither is.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, delete, func, text, update
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlmodel import Session, col, select

from bot.storage.database import open_session
from bot.storage.index_text import owner_token
from bot.storage.memory_models import MemoryCursor, MemoryItem, MessageEmbedding
from bot.storage.models import ChatSession, Message, table_of, utcnow
from transcript.kinds import CONVERSATION_KINDS, SAID_KINDS

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
CURSORS = table_of(MemoryCursor)
CURSOR_OF_SESSION = sa_select(CURSORS).where(CURSORS.c.session_id == bindparam("session_id"))
CURSOR_SEQ = sa_select(CURSORS.c.last_seq).where(CURSORS.c.session_id == bindparam("session_id"))
CONVERSATION_AFTER = (
    select(Message)
    .where(
        col(Message.session_id) == bindparam("session_id"),
        col(Message.seq) > bindparam("after_seq"),
        col(Message.kind).in_(sorted(CONVERSATION_KINDS)),
    )
    .order_by(col(Message.seq))
)
# Rows of the current window that may be ranked before being left out.
WINDOW_ALLOWANCE = 40
SOURCES = ("memory", "message")


@dataclass(frozen=True)
class Owner:
    """Who memory belongs to: ("person", person id) or ("group", "lane:chat_id")."""

    kind: str
    id: str

    @classmethod
    def of(cls, session: ChatSession) -> Owner:
        return cls(session.owner_kind, session.owner_id)


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


@dataclass(frozen=True)
class RecallHit:
    """One search result: a memory item or a stored message outside the window."""

    source: str  # "memory" | "message"
    id: int
    text: str
    label: str  # the item's kind, or the message's role
    session_id: str
    seq: int | None  # the message's seq, or the first seq of the item's source messages
    last_seq: int | None  # the last seq of the item's source messages (a message: its own)
    said_at: datetime | None  # when the message (or the item's source) was said
    sender_name: str | None  # who said the message; None for items (their text names the speaker)
    score: float  # higher is more relevant
    # The message right after a message that asks a question (its answer, most often);
    # `last_seq` then is the reply's seq.
    reply: RecallHit | None = None


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


@dataclass(frozen=True)
class Backlog:
    """What memory has not caught up with yet, for one owner."""

    messages: int  # conversation messages after their session's offload cursor
    sessions: int  # sessions they belong to
    unembedded: int  # offloaded messages with no vector (a backfill or reindex embeds them)


class CursorMoved(Exception):
    """Another worker offloaded the same range first; this batch is dropped."""


class MemoryStore:
    def __init__(self, database: DatabaseEngine) -> None:
        self.database = database

    def _session(self) -> Session:
        return open_session(self.database)

    # --- the offload cursor ----------------------------------------------------

    # A turn reads the cursor's seq (does its reply reach an offload trigger?); the offload
    # job reads the cursor and the messages after it. The cursor is one row: a Core
    # statement, as the ORM's per-query set-up costs more than building it. The messages
    # are up to a chunk (16 and more): ORM rows, as building each from a Core row costs
    # five times what the ORM's loading does.
    def cursor_seq(self, session_id: str) -> int | None:
        """The seq of the last offloaded message (None: nothing offloaded yet)."""
        with self.database.connect() as connection:
            found: int | None = connection.execute(CURSOR_SEQ, {"session_id": session_id}).scalar()
        return found

    def cursor(self, session_id: str) -> MemoryCursor | None:
        with self.database.connect() as connection:
            found = connection.execute(CURSOR_OF_SESSION, {"session_id": session_id}).first()
        return MemoryCursor(**found._mapping) if found is not None else None

    def messages_after(self, session_id: str, after_seq: int) -> list[Message]:
        """Conversation messages (no `system` events) after `after_seq`, oldest first."""
        with self._session() as db:
            return list(
                db.exec(CONVERSATION_AFTER, params={"session_id": session_id, "after_seq": after_seq})
            )

    def message_at(self, session_id: str, seq: int) -> Message | None:
        with self._session() as db:
            return db.exec(
                select(Message).where(Message.session_id == session_id, Message.seq == seq)
            ).first()

    def commit_offload(
        self,
        session: ChatSession,
        expected_seq: int | None,
        new_seq: int,
        fingerprint: str,
        items: Sequence[NewMemoryItem],
        *,
        deduped: int,
        reset: bool,
        message_vectors: Sequence[tuple[int, bytes]] = (),
    ) -> CommitCounts:
        """Store `items` and move the cursor from `expected_seq` to `new_seq`, atomically.

        `expected_seq` is None when the session has no cursor yet. Raises
        `CursorMoved` (and stores nothing) if the cursor is no longer there.
        """
        now = utcnow()
        with self._session() as db:
            # The owner as stored now: linking may have moved the session to another person
            # since the caller read it (an idle offload holds its session for minutes).
            owner = Owner.of(db.get(ChatSession, session.id) or session)
            written, merged = _store_items(db, owner, session.id, items, now)
            for message_id, vector in message_vectors:
                db.merge(
                    MessageEmbedding(
                        message_id=message_id, owner_kind=owner.kind, owner_id=owner.id, vector=vector
                    )
                )
            self._advance(db, session, owner, expected_seq, new_seq, fingerprint, now)
            db.execute(
                update(MemoryCursor)
                .where(col(MemoryCursor.session_id) == session.id)
                .values(
                    offloads=MemoryCursor.offloads + 1,
                    written=MemoryCursor.written + written,
                    merged=MemoryCursor.merged + merged,
                    deduped=MemoryCursor.deduped + deduped,
                    resets=MemoryCursor.resets + (1 if reset else 0),
                )
            )
            db.commit()
        if written or merged or message_vectors:
            VECTOR_CHANGES.note(self.database, owner)
        return CommitCounts(written=written, merged=merged)

    def add_items(self, session: ChatSession, items: Sequence[NewMemoryItem]) -> CommitCounts:
        """Store items written outside an offload (the `remember` tool); the cursor stays."""
        with self._session() as db:
            owner = Owner.of(db.get(ChatSession, session.id) or session)
            written, merged = _store_items(db, owner, session.id, items, utcnow())
            db.commit()
        return CommitCounts(written=written, merged=merged)

    def _advance(
        self,
        db: Session,
        session: ChatSession,
        owner: Owner,
        expected_seq: int | None,
        new_seq: int,
        fingerprint: str,
        now: datetime,
    ) -> None:
        if expected_seq is None:
            if db.get(MemoryCursor, session.id) is not None:
                db.rollback()
                raise CursorMoved(session.id)
            db.add(
                MemoryCursor(
                    session_id=session.id,
                    owner_kind=owner.kind,
                    owner_id=owner.id,
                    last_seq=new_seq,
                    fingerprint=fingerprint,
                    updated_at=now,
                )
            )
            db.flush()
            return
        # Compare-and-set: with several processes, only one moves the cursor.
        moved = db.execute(
            update(MemoryCursor)
            .where(
                col(MemoryCursor.session_id) == session.id,
                col(MemoryCursor.last_seq) == expected_seq,
            )
            .values(last_seq=new_seq, fingerprint=fingerprint, updated_at=now)
        )
        if moved.rowcount == 0:  # type: ignore[attr-defined]
            db.rollback()
            raise CursorMoved(session.id)

    # --- items ---------------------------------------------------------------

    def recent_items(self, owner: Owner, limit: int) -> list[MemoryItem]:
        """The owner's most recently written or reinforced items, newest first."""
        with self._session() as db:
            return list(
                db.exec(NEWEST_ITEMS, params={"owner_kind": owner.kind, "owner_id": owner.id, "limit": limit})
            )

    def all_items(self, owner: Owner) -> list[MemoryItem]:
        """Every item of the owner, oldest first (for export)."""
        with self._session() as db:
            return list(
                db.exec(
                    select(MemoryItem)
                    .where(MemoryItem.owner_kind == owner.kind, MemoryItem.owner_id == owner.id)
                    .order_by(col(MemoryItem.id))
                )
            )

    def count_items(self, owner: Owner) -> int:
        with self._session() as db:
            return int(
                db.exec(
                    select(func.count())
                    .select_from(MemoryItem)
                    .where(MemoryItem.owner_kind == owner.kind, MemoryItem.owner_id == owner.id)
                ).one()
            )

    def delete_item(self, owner: Owner, item_id: int) -> bool:
        """Remove one item; False when the owner has no item with that id."""
        with self._session() as db:
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

    def totals(self, owner: Owner) -> dict[str, int]:
        """Offload counters summed over the owner's sessions."""
        with self._session() as db:
            row = db.exec(
                select(
                    func.coalesce(func.sum(MemoryCursor.offloads), 0),
                    func.coalesce(func.sum(MemoryCursor.written), 0),
                    func.coalesce(func.sum(MemoryCursor.merged), 0),
                    func.coalesce(func.sum(MemoryCursor.deduped), 0),
                ).where(MemoryCursor.owner_kind == owner.kind, MemoryCursor.owner_id == owner.id)
            ).one()
            return dict(zip(("offloads", "written", "merged", "deduped"), map(int, row), strict=True))

    # --- recall ----------------------------------------------------------------

    def full_text(
        self,
        owner: Owner,
        terms: Sequence[str],
        candidates: int,
        *,
        window_session_id: str | None = None,
        window_from_seq: int | None = None,
        include_messages: bool = True,
    ) -> dict[str, list[RecallHit]]:
        """Memory items and stored messages of `owner` matching any of `terms`, each list best first.

        Messages of `window_session_id` from `window_from_seq` on are the model's
        current window and are left out. Scores are each backend's own relevance
        (bm25 or ts_rank): comparable within a list, not across lists.
        """
        ranked: dict[str, list[RecallHit]] = {source: [] for source in SOURCES}
        if not terms or candidates <= 0:
            return ranked
        params: dict[str, Any] = {
            "owner_kind": owner.kind,
            "owner_id": owner.id,
            **_window(window_session_id, window_from_seq),
            # The window's own messages match their query best; they are taken out
            # after ranking, so rank enough to still have `candidates` left.
            "candidates": candidates + (WINDOW_ALLOWANCE if window_session_id is not None else 0),
        }
        if self.database.dialect.name == "postgresql":
            params.update({f"term_{n}": term for n, term in enumerate(terms)})
            statement = {source: postgres_search(source, len(terms)) for source in ("memory", "messages")}
        else:
            # The owner token narrows the match inside the index (see migration 0003).
            owner_match = f'owner:"{owner_token(owner.kind, owner.id)}"'
            any_term = " OR ".join(f'"{term}"' for term in terms)
            params["memory_query"] = f"{owner_match} AND search_text:({any_term})"
            params["message_query"] = f"{owner_match} AND content:({any_term})"
            statement = _SQLITE_SEARCH
        parts = [statement["memory"]] + ([statement["messages"]] if include_messages else [])
        sql = " UNION ALL ".join(f"SELECT * FROM ({part}) AS part_{n}" for n, part in enumerate(parts))
        with self.database.connect() as connection:
            rows = connection.execute(text(sql), params).all()
        # Ranked beyond `candidates` (the window's allowance), but only the best of each
        # source become hits: converting a row costs more than ranking it.
        for row in sorted(rows, key=lambda row: float(row.score), reverse=True):
            hits = ranked[row.source]
            if float(row.score) > 0 and len(hits) < candidates:
                hits.append(_hit(row))
        return ranked

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

    def backlog(self, owner: Owner, *, dense: bool) -> Backlog:
        """Messages of the owner the offload has not reached, and (with `dense`) offloaded
        ones without a vector: recall finds them by full text only, without their items."""
        params = {"owner_kind": owner.kind, "owner_id": owner.id}
        with self.database.connect() as connection:
            messages, sessions = connection.execute(_NOT_OFFLOADED, params).one()
            unembedded = connection.execute(_NOT_EMBEDDED, params).scalar_one() if dense else 0
        return Backlog(int(messages), int(sessions), int(unembedded))

    def vector_generation(self, owner: Owner) -> tuple[int, int]:
        """Changes this process made to the owner's vectors (see `VectorChanges`)."""
        return VECTOR_CHANGES.generation(self.database, owner)

    def hits_by_id(
        self,
        owner: Owner,
        source: str,
        ids: Sequence[int],
        *,
        window_session_id: str | None = None,
        window_from_seq: int | None = None,
    ) -> list[RecallHit]:
        """The owner's items or messages with these ids, in the order given (missing ones left out)."""
        if not ids:
            return []
        sql = (_ITEMS_BY_ID if source == "memory" else _MESSAGES_BY_ID).bindparams(
            bindparam("ids", expanding=True)
        )
        params = {
            "owner_kind": owner.kind,
            "owner_id": owner.id,
            "ids": list(ids),
            **_window(window_session_id, window_from_seq),
        }
        with self.database.connect() as connection:
            found = {int(row.id): _hit(row) for row in connection.execute(sql, params)}
        return [found[identifier] for identifier in ids if identifier in found]

    def following_messages(
        self,
        owner: Owner,
        places: Sequence[tuple[str, int]],
        *,
        window_session_id: str | None = None,
        window_from_seq: int | None = None,
    ) -> dict[tuple[str, int], RecallHit]:
        """The owner's message right after each (session, seq), outside the window, keyed by that place."""
        found: dict[tuple[str, int], RecallHit] = {}
        by_session: dict[str, list[int]] = {}
        for session_id, seq in places:
            by_session.setdefault(session_id, []).append(seq + 1)
        with self.database.connect() as connection:
            for session_id, seqs in by_session.items():
                params = {
                    "owner_kind": owner.kind,
                    "owner_id": owner.id,
                    "session_id": session_id,
                    "seqs": seqs,
                    **_window(window_session_id, window_from_seq),
                }
                for row in connection.execute(_MESSAGES_AT, params):
                    found[(session_id, int(row.seq) - 1)] = _hit(row)
        return found


def _store_items(
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


def _window(session_id: str | None, from_seq: int | None) -> dict[str, Any]:
    return {
        "window_session": session_id or "",
        "window_from": from_seq if from_seq is not None else 2**62,
    }


def _hit(row: Any) -> RecallHit:
    return RecallHit(
        source=row.source,
        id=int(row.id),
        text=row.content,
        label=row.label,
        session_id=row.session_id,
        seq=row.seq,
        last_seq=row.last_seq,
        said_at=None if row.said_at is None else _as_datetime(row.said_at),
        sender_name=row.sender_name,
        score=float(row.score),
    )


_ITEM_COLUMNS = (
    "'memory' AS source, m.id AS id, m.content AS content, m.kind AS label, m.session_id AS session_id, "
    "m.source_seq AS seq, m.source_last_seq AS last_seq, m.said_at AS said_at, NULL AS sender_name"
)
_MESSAGE_COLUMNS = (
    "'message' AS source, g.id AS id, g.content AS content, g.role AS label, g.session_id AS session_id, "
    "g.seq AS seq, g.seq AS last_seq, g.created_at AS said_at, g.sender_name AS sender_name"
)
# What was said (search and embeddings), not tool calls and results.
_IS_SAID = f"g.kind IN ({', '.join(repr(kind) for kind in sorted(SAID_KINDS))})"
_OUTSIDE_WINDOW = "NOT (g.session_id = :window_session AND g.seq >= :window_from)"
# bm25() is lower-is-better; it is negated so both backends rank by a higher score.
# The owner column gets weight 0: it narrows the match and takes no part in ranking.
_SQLITE_SEARCH = {
    "memory": (
        f"SELECT {_ITEM_COLUMNS}, hits.score AS score "
        "FROM (SELECT rowid, -bm25(memory_items_fts, 0.0, 1.0) AS score FROM memory_items_fts "
        "WHERE memory_items_fts MATCH :memory_query ORDER BY score DESC LIMIT :candidates) AS hits "
        "JOIN memory_items m ON m.id = hits.rowid "
        "WHERE m.owner_kind = :owner_kind AND m.owner_id = :owner_id"
    ),
    "messages": (
        f"SELECT {_MESSAGE_COLUMNS}, hits.score AS score "
        "FROM (SELECT rowid, -bm25(messages_fts, 0.0, 1.0) AS score FROM messages_fts "
        "WHERE messages_fts MATCH :message_query ORDER BY score DESC LIMIT :candidates) AS hits "
        "JOIN messages g ON g.id = hits.rowid JOIN sessions s ON s.id = g.session_id "
        f"WHERE s.owner_kind = :owner_kind AND s.owner_id = :owner_id AND {_OUTSIDE_WINDOW}"
    ),
}
# PostgreSQL's text-search configuration: English stemming, as SQLite's porter tokenizer
# (the stored `search_vector` columns of migration 0015 are computed with it; queries too).
POSTGRES_SEARCH_CONFIG = "english"
# The index text (the same SQLite's index holds) as a vector, stored with the row.
_POSTGRES_MESSAGE_TEXT = "f.search_vector"
_POSTGRES_ITEM_TEXT = "m.search_vector"
_HIT_COLUMNS = "source, id, content, label, session_id, seq, last_seq, said_at, sender_name"
# Per source on PostgreSQL: the hit's columns, its text as a vector, and the owner's rows.
_POSTGRES_SOURCES = {
    "memory": (
        _ITEM_COLUMNS,
        _POSTGRES_ITEM_TEXT,
        "FROM memory_items m WHERE m.owner_kind = :owner_kind AND m.owner_id = :owner_id",
    ),
    "messages": (
        _MESSAGE_COLUMNS,
        _POSTGRES_MESSAGE_TEXT,
        "FROM messages_fts f JOIN messages g ON g.id = f.message_id JOIN sessions s ON s.id = g.session_id "
        f"WHERE s.owner_kind = :owner_kind AND s.owner_id = :owner_id AND {_IS_SAID}",
    ),
}
# The window's messages are left out after matching, as on SQLite.
_OUTSIDE_WINDOW_MATCHED = "NOT (session_id = :window_session AND seq >= :window_from)"


@functools.lru_cache(maxsize=32)
def postgres_search(source: str, terms: int) -> str:
    """The search of one source for `terms` query terms (`:term_0` …), ranked as bm25 ranks.

    `ts_rank` alone weighs every matched word alike, so a common word ranks a row as high
    as a rare one; SQLite's bm25 weighs each word by its inverse document frequency. Here
    each term's `ts_rank` is weighted the same way, from how many of the owner's rows hold
    it (counted over the rows that match the query) and how many rows the owner has.
    """
    columns, vector, owned = _POSTGRES_SOURCES[source]
    queries = [f"to_tsquery('{POSTGRES_SEARCH_CONFIG}', :term_{n})" for n in range(terms)]
    any_term = " || ".join(queries)
    holding = ", ".join(
        f"count(*) FILTER (WHERE vector @@ {query})::float8 AS held_{n}" for n, query in enumerate(queries)
    )
    # Each term's weight once per search, in float8 (a materialised one-row table): written
    # into the score, it was computed in numeric for every matched row, most of the
    # search's time when a common word (a speaker's name) matched hundreds of rows.
    weights = ", ".join(
        f"ln(1 + (everyone.rows - held.held_{n} + 0.5) / (held.held_{n} + 0.5)) AS weight_{n}"
        for n in range(terms)
    )
    weighted = " + ".join(f"weights.weight_{n} * ts_rank(vector, {query})" for n, query in enumerate(queries))
    window = f" WHERE {_OUTSIDE_WINDOW_MATCHED}" if source == "messages" else ""
    return (
        f"WITH matched AS MATERIALIZED "
        f"(SELECT {columns}, {vector} AS vector {owned} AND {vector} @@ ({any_term})), "
        f"held AS (SELECT {holding} FROM matched), "
        f"everyone AS (SELECT count(*)::float8 AS rows {owned}), "
        f"weights AS MATERIALIZED (SELECT {weights} FROM held CROSS JOIN everyone) "
        f"SELECT {_HIT_COLUMNS}, {weighted} AS score FROM matched CROSS JOIN weights"
        f"{window} ORDER BY score DESC LIMIT :candidates"
    )


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
_OWNER_MESSAGES = (
    "FROM messages g JOIN sessions s ON s.id = g.session_id "
    "LEFT JOIN memory_cursors c ON c.session_id = g.session_id "
    "WHERE s.owner_kind = :owner_kind AND s.owner_id = :owner_id AND g.role != 'system' "
)
_NOT_OFFLOADED = text(
    f"SELECT count(*), count(DISTINCT g.session_id) {_OWNER_MESSAGES}AND g.seq > coalesce(c.last_seq, 0)"
)
_NOT_EMBEDDED = text(
    f"SELECT count(*) {_OWNER_MESSAGES}AND g.seq <= c.last_seq AND g.content != '' "
    "AND NOT EXISTS (SELECT 1 FROM message_embeddings e WHERE e.message_id = g.id)"
)
_ITEMS_WITHOUT_VECTOR = text(
    "SELECT id, content FROM memory_items WHERE embedding IS NULL AND id > :after ORDER BY id LIMIT :limit"
)
_MESSAGES_WITHOUT_VECTOR = text(
    "SELECT g.id, g.sender_name, g.content, s.owner_kind, s.owner_id FROM messages g "
    "JOIN sessions s ON s.id = g.session_id "
    "JOIN memory_cursors c ON c.session_id = g.session_id AND g.seq <= c.last_seq "
    "LEFT JOIN message_embeddings e ON e.message_id = g.id "
    f"WHERE e.message_id IS NULL AND {_IS_SAID} AND g.id > :after ORDER BY g.id LIMIT :limit"
)
_SET_ITEM_VECTOR = text("UPDATE memory_items SET embedding = :vector WHERE id = :id AND embedding IS NULL")
_ADD_MESSAGE_VECTOR = text(
    "INSERT INTO message_embeddings (message_id, owner_kind, owner_id, vector) "
    "VALUES (:id, :owner_kind, :owner_id, :vector) ON CONFLICT (message_id) DO NOTHING"
)
_ITEMS_BY_ID = text(
    f"SELECT {_ITEM_COLUMNS}, 0.0 AS score FROM memory_items m WHERE m.id IN :ids "
    "AND m.owner_kind = :owner_kind AND m.owner_id = :owner_id"
)
_MESSAGES_AT = text(
    f"SELECT {_MESSAGE_COLUMNS}, 0.0 AS score FROM messages g JOIN sessions s ON s.id = g.session_id "
    "WHERE g.session_id = :session_id AND g.seq IN :seqs AND g.role != 'system' "
    f"AND s.owner_kind = :owner_kind AND s.owner_id = :owner_id AND {_OUTSIDE_WINDOW}"
).bindparams(bindparam("seqs", expanding=True))
_MESSAGES_BY_ID = text(
    f"SELECT {_MESSAGE_COLUMNS}, 0.0 AS score FROM messages g JOIN sessions s ON s.id = g.session_id "
    f"WHERE g.id IN :ids AND s.owner_kind = :owner_kind AND s.owner_id = :owner_id AND {_OUTSIDE_WINDOW}"
)


def _as_datetime(value: Any) -> datetime:
    # Raw SQL on SQLite returns the stored text; PostgreSQL returns a datetime.
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
