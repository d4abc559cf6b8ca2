"""The offload cursor: how far each session's transcript has reached long-term memory.

A part of `MemoryStore`. Items (and the vectors of their messages) and the cursor that
covers them commit in one transaction (`commit_offload`): either both are stored or
neither is, and with several processes only one moves a cursor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, func, text, update
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlmodel import Session, col, select

from bot.errors import StorageConflict
from bot.storage.database import open_session
from bot.storage.memory_items import CommitCounts, NewMemoryItem, store_items
from bot.storage.memory_models import MemoryCursor, MessageEmbedding
from bot.storage.memory_vectors import VECTOR_CHANGES
from bot.storage.models import ChatSession, Message, table_of, utcnow
from bot.storage.owners import Owner
from transcript.kinds import CONVERSATION_KINDS

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


@dataclass(frozen=True)
class Backlog:
    """What memory has not caught up with yet, for one owner."""

    messages: int  # conversation messages after their session's offload cursor
    sessions: int  # sessions they belong to
    unembedded: int  # offloaded messages with no vector (a backfill or reindex embeds them)


class CursorMoved(StorageConflict):
    """Another worker offloaded the same range first; this batch is dropped."""


class MemoryCursors:
    """Reads and moves of the offload cursors (a part of `MemoryStore`)."""

    database: DatabaseEngine

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
        with open_session(self.database) as db:
            return list(
                db.exec(CONVERSATION_AFTER, params={"session_id": session_id, "after_seq": after_seq})
            )

    def message_at(self, session_id: str, seq: int) -> Message | None:
        with open_session(self.database) as db:
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
        with open_session(self.database) as db:
            # The owner as stored now: linking may have moved the session to another person
            # since the caller read it (an idle offload holds its session for minutes).
            owner = Owner.of(db.get(ChatSession, session.id) or session)
            counts = store_items(db, owner, session.id, items, now)
            written, merged = counts.written, counts.merged
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
        return counts

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

    def totals(self, owner: Owner) -> dict[str, int]:
        """Offload counters summed over the owner's sessions."""
        with open_session(self.database) as db:
            row = db.exec(
                select(
                    func.coalesce(func.sum(MemoryCursor.offloads), 0),
                    func.coalesce(func.sum(MemoryCursor.written), 0),
                    func.coalesce(func.sum(MemoryCursor.merged), 0),
                    func.coalesce(func.sum(MemoryCursor.deduped), 0),
                ).where(MemoryCursor.owner_kind == owner.kind, MemoryCursor.owner_id == owner.id)
            ).one()
            return dict(zip(("offloads", "written", "merged", "deduped"), map(int, row), strict=True))

    def backlog(self, owner: Owner, *, dense: bool) -> Backlog:
        """Messages of the owner the offload has not reached, and (with `dense`) offloaded
        ones without a vector: recall finds them by full text only, without their items."""
        params = {"owner_kind": owner.kind, "owner_id": owner.id}
        with self.database.connect() as connection:
            messages, sessions = connection.execute(_NOT_OFFLOADED, params).one()
            unembedded = connection.execute(_NOT_EMBEDDED, params).scalar_one() if dense else 0
        return Backlog(int(messages), int(sessions), int(unembedded))


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
