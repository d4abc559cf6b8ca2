"""Long-term memory tables: distilled items per owner, and one offload cursor per session.

Memory belongs to an owner (a person, or a group chat), never to one lane. The
full-text indexes over items and messages are created by migration 0003.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, LargeBinary, Text
from sqlmodel import Field, SQLModel

from bot.storage.models import utcnow


class MemoryItem(SQLModel, table=True):
    """One durable fact: a decision, constraint, conclusion or fact."""

    __tablename__ = "memory_items"
    __table_args__ = (
        Index("ix_memory_items_owner", "owner_kind", "owner_id", "updated_at"),
        Index("ix_memory_items_owner_key", "owner_kind", "owner_id", "content_key"),
        Index("ix_memory_items_owner_slot", "owner_kind", "owner_id", "slot"),
    )

    id: int | None = Field(default=None, primary_key=True)
    owner_kind: str = Field(max_length=16)  # "person" | "group"
    owner_id: str = Field(max_length=256)
    # The session and the range of messages (first and last seq) the item was taken from.
    session_id: str = Field(max_length=32)
    source_seq: int | None = None
    source_last_seq: int | None = None
    # When its source messages were said (not when the offload ran): dates in
    # recall and date search come from here.
    said_at: datetime | None = None
    kind: str = Field(max_length=16)
    content: str = Field(sa_column=Column(Text, nullable=False))
    # `content` normalised for the full-text index (CJK split into characters).
    search_text: str = Field(sa_column=Column(Text, nullable=False))
    # Hash of the normalised words: equal wording merges into one item.
    content_key: str = Field(max_length=32)
    importance: int = 5
    source: str = Field(max_length=16)  # "tag" | "rules" | "model"
    # How often the item was stated; repeats merge into the stored item.
    mentions: int = 1
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    # The sentence embedding of `content` (float32, unit length), when dense recall is on.
    embedding: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    # Whom the item is about and who said it (a person id and the name they spoke under);
    # None where unknown, and `said_by` None for what the assistant said.
    about: str | None = Field(default=None, max_length=256)
    said_by: str | None = Field(default=None, max_length=32)
    said_by_name: str | None = Field(default=None, max_length=256)
    # What the item states of its subject ("priya|lives_in"), when the offline rules know:
    # a newer item of the same slot replaces it.
    slot: str | None = Field(default=None, max_length=160)
    # The newer item that replaced this one, and when this one stopped holding; a replaced
    # item stays as history (`/memory history`), out of the snapshot and below its successor.
    superseded_by: int | None = None
    valid_until: datetime | None = None

    @property
    def current(self) -> bool:
        return self.superseded_by is None


class MessageEmbedding(SQLModel, table=True):
    """The sentence embedding of one stored message, written by the offload job.

    Messages are append-only, so their vectors live beside them; the owner is
    copied here so dense recall reads one owner's vectors without a join.
    """

    __tablename__ = "message_embeddings"
    __table_args__ = (Index("ix_message_embeddings_owner", "owner_kind", "owner_id", "message_id"),)

    message_id: int = Field(primary_key=True, foreign_key="messages.id")
    owner_kind: str = Field(max_length=16)
    owner_id: str = Field(max_length=256)
    vector: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class MemoryCursor(SQLModel, table=True):
    """How far a session's transcript has been offloaded, and what that produced."""

    __tablename__ = "memory_cursors"

    session_id: str = Field(primary_key=True, max_length=32)
    owner_kind: str = Field(max_length=16)
    owner_id: str = Field(index=True, max_length=256)
    # The last message seq whose content is in memory, and a hash of that message
    # to notice a transcript that changed under the cursor.
    last_seq: int = 0
    fingerprint: str = Field(default="", max_length=32)
    offloads: int = 0
    written: int = 0
    merged: int = 0
    deduped: int = 0
    resets: int = 0
    updated_at: datetime = Field(default_factory=utcnow)
