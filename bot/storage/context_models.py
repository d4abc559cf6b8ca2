"""Context-management tables: summary and collapse records, and snips.

They sit next to the transcript and never change it: a record says which
stored messages it stands for (by sequence), the messages themselves stay.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from bot.storage.models import utcnow

SUMMARY = "summary"
COLLAPSE = "collapse"


class ContextRecord(SQLModel, table=True):
    """A compaction summary or a collapse, and the message range it folds.

    A summary is cumulative: its text covers every message up to `last_seq`,
    and `first_seq` is where it took over from the previous summary. A collapse
    stands for exactly `first_seq`..`last_seq`. Ranges are derived from the
    records already stored, so two processes planning the same step pick the
    same `first_seq` and the unique key lets only one of them store it.
    """

    __tablename__ = "context_records"
    __table_args__ = (
        UniqueConstraint("session_id", "kind", "first_seq"),
        # The newest summary of a session, read on every model call (migration 0016).
        Index("ix_context_records_latest", "session_id", "kind", "last_seq"),
    )

    id: int | None = Field(default=None, primary_key=True)
    session_id: str = Field(index=True, max_length=32)
    kind: str = Field(max_length=16)  # SUMMARY | COLLAPSE
    first_seq: int
    last_seq: int
    text: str = Field(sa_column=Column(Text, nullable=False))
    token_count: int = 0
    # What /compact was asked to focus on, if anything.
    focus: str | None = Field(default=None, max_length=500)
    created_at: datetime = Field(default_factory=utcnow)


class ContextSnip(SQLModel, table=True):
    """Messages `first_seq`..`last_seq` are kept out of the model's context until undone."""

    __tablename__ = "context_snips"

    id: int | None = Field(default=None, primary_key=True)
    session_id: str = Field(index=True, max_length=32)
    first_seq: int
    last_seq: int
    created_at: datetime = Field(default_factory=utcnow)
    # Set by /unsnip; the snip stays stored as a record of what was done.
    undone_at: datetime | None = None
