"""Where each turn's answer goes, so another process or a restart can finish it."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from bot.storage.models import utcnow


class Delivery(SQLModel, table=True):
    """One turn a person asked for: the user message, where its answer goes, how far it got.

    `state`: `open` (being answered, or left unanswered by a process that died),
    `replied` (the reply is stored; the lane may still be showing it), `delivered`
    (set by recovery; a lane that shows a reply in full drops the row instead),
    `recovered`, `noticed` (the person was told it went unanswered), `failed`.
    `owner` is the process answering it; a process that finds an `open` turn of a
    dead owner may claim it, and the claim is one conditional UPDATE, so two
    processes never both answer.
    """

    __tablename__ = "deliveries"

    user_message_id: int = Field(primary_key=True)
    session_id: str = Field(max_length=32)
    # "lane:chat:message", as on the message row: how a lane names the turn.
    ingest_key: str = Field(unique=True, max_length=300)
    lane: str = Field(max_length=16)
    chat_id: str = Field(max_length=128)
    chat_kind: str = Field(max_length=16)
    thread_id: str | None = Field(default=None, max_length=128)
    platform_message_id: str = Field(max_length=128)
    # The platform id of the visible draft of the reply, once one was sent.
    draft_id: str | None = Field(default=None, max_length=128)
    state: str = Field(default="open", max_length=16)
    owner: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    updated_at: datetime = Field(default_factory=utcnow)
