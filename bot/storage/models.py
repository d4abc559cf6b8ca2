"""The database tables. Only `bot.storage` imports this module.

The transcript is append-only: context management adds records next to
messages and never rewrites or deletes one.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import Column, Index, Table, Text, UniqueConstraint
from sqlalchemy import inspect as inspect_mapping
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    # SQLite hands datetimes back without an offset; they were stored as UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def new_id() -> str:
    return uuid.uuid4().hex


class Person(SQLModel, table=True):
    """One human, possibly with accounts on several lanes."""

    __tablename__ = "persons"

    id: str = Field(primary_key=True, max_length=32)
    # The private session every linked account of this person talks in.
    active_session_id: str | None = Field(default=None, max_length=32)
    created_at: datetime = Field(default_factory=utcnow)


class Account(SQLModel, table=True):
    """A platform account (lane + platform user id) belonging to a person."""

    __tablename__ = "accounts"
    __table_args__ = (UniqueConstraint("lane", "platform_user_id"),)

    id: int | None = Field(default=None, primary_key=True)
    lane: str = Field(max_length=16)
    platform_user_id: str = Field(max_length=128)
    person_id: str = Field(index=True, max_length=32)
    display_name: str = Field(default="", max_length=256)
    username: str | None = Field(default=None, max_length=256)
    created_at: datetime = Field(default_factory=utcnow)


class GroupRoute(SQLModel, table=True):
    """A group chat (or one of its threads) and the session it talks in."""

    __tablename__ = "group_routes"
    __table_args__ = (UniqueConstraint("lane", "chat_id", "thread_id"),)

    id: int | None = Field(default=None, primary_key=True)
    lane: str = Field(max_length=16)
    chat_id: str = Field(max_length=128)
    # "" rather than NULL so the unique constraint holds on every backend.
    thread_id: str = Field(default="", max_length=128)
    session_id: str = Field(max_length=32)
    created_at: datetime = Field(default_factory=utcnow)


class ChatSession(SQLModel, table=True):
    """One ongoing conversation with its own transcript and active persona."""

    __tablename__ = "sessions"

    id: str = Field(primary_key=True, max_length=32)
    kind: str = Field(max_length=16)  # "private" | "group"
    # Memory and recall belong to the owner: a person, or a group route.
    owner_kind: str = Field(max_length=16)  # "person" | "group"
    owner_id: str = Field(index=True, max_length=256)
    persona_id: str | None = Field(default=None, max_length=64)
    title: str = Field(default="", max_length=256)
    # Last allocated message sequence; bumped in the same transaction as each insert.
    last_seq: int = Field(default=0)
    # Lets a turn skip the documents query for the many sessions that have none.
    document_count: int = Field(default=0)
    # The `models:` entry picked with /model (None: the persona's model) and the /think level.
    model_choice: str | None = Field(default=None, max_length=64)
    thinking: str | None = Field(default=None, max_length=8)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Message(SQLModel, table=True):
    """One stored message: a conversation message or an event (`kind`, see `transcript.kinds`).

    Events are `system` rows that never reach the model. `role`, `kind` and `status` hold
    values of the closed sets in `transcript.kinds`; `MessageStore.append` checks them.
    """

    __tablename__ = "messages"
    # `ix_messages_kind_id`: the console's newest tool calls of every conversation, without a scan.
    __table_args__ = (UniqueConstraint("session_id", "seq"), Index("ix_messages_kind_id", "kind", "id"))

    id: int | None = Field(default=None, primary_key=True)
    session_id: str = Field(index=True, max_length=32)
    seq: int
    role: str = Field(max_length=16)
    content: str = Field(default="", sa_column=Column(Text, nullable=False))
    persona_id: str | None = Field(default=None, max_length=64)
    sender_id: str | None = Field(default=None, max_length=160)
    sender_name: str | None = Field(default=None, max_length=256)
    lane: str | None = Field(default=None, max_length=16)
    platform_chat_id: str | None = Field(default=None, max_length=128)
    platform_message_id: str | None = Field(default=None, max_length=128)
    # "lane:chat:message" for messages that arrived live; unique, so a platform
    # re-delivering an event stores it once. Imported copies carry none.
    ingest_key: str | None = Field(default=None, unique=True, max_length=300)
    # For assistant rows: the user message this reply answers.
    reply_to_id: int | None = Field(default=None, index=True)
    token_count: int = 0
    # Lets the window load skip the attachments query for messages without files.
    attachment_count: int = 0
    status: str = Field(default="complete", max_length=16)
    created_at: datetime = Field(default_factory=utcnow)
    kind: str = Field(default="message", max_length=24)
    # A `tool_call` row's calls, as JSON ([{"id", "name", "arguments"}, ...]), and a
    # `tool_result` row's call id and tool name.
    tool_calls: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    tool_call_id: str | None = Field(default=None, max_length=128)
    tool_name: str | None = Field(default=None, max_length=128)
    # For replies: the model that answered (a fallback's, when the usual one could not).
    model: str | None = Field(default=None, max_length=256)
    # The answer in its provider's own blocks, as JSON ({"provider", "blocks"}): signed
    # thinking that must go back unchanged with the calls it led to. None for most rows.
    provider_blocks: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # For replies: the prompt tokens the server billed for the turn's model calls, of them
    # read from its prompt cache and written to it (None: the server reported none).
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None


class Attachment(SQLModel, table=True):
    """A file stored by reference under the data directory."""

    __tablename__ = "attachments"

    id: int | None = Field(default=None, primary_key=True)
    message_id: int = Field(index=True)
    session_id: str = Field(index=True, max_length=32)
    kind: str = Field(max_length=16)  # "image" | "document" | "audio" | "voice"
    filename: str = Field(max_length=512)
    mime_type: str = Field(max_length=128)
    size: int
    sha256: str = Field(index=True, max_length=64)
    # Path relative to the data directory; files are shared by content hash.
    path: str = Field(max_length=512)
    # Documents: extracted text; voice notes and audio: the transcript, once heard. Stored on
    # the first row of a content hash only: later copies read it from there.
    text: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # Voice notes and audio: the length measured by decoding the file at arrival.
    duration_seconds: float | None = None
    created_at: datetime = Field(default_factory=utcnow)


class SpokenSession(SQLModel, table=True):
    """A session whose replies are also spoken (`/voice on`); no row means text only."""

    __tablename__ = "spoken_sessions"

    session_id: str = Field(primary_key=True, max_length=32)
    created_at: datetime = Field(default_factory=utcnow)


class ReasoningSession(SQLModel, table=True):
    """A session that shows the model's thinking beside its replies (`/reasoning on`); no row: hidden."""

    __tablename__ = "reasoning_sessions"

    session_id: str = Field(primary_key=True, max_length=32)
    created_at: datetime = Field(default_factory=utcnow)


class LinkCode(SQLModel, table=True):
    """A one-time code that joins another account to a person."""

    __tablename__ = "link_codes"

    code: str = Field(primary_key=True, max_length=16)
    person_id: str = Field(index=True, max_length=32)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime
    used_at: datetime | None = None


class VisitorToken(SQLModel, table=True):
    """An anonymous web visitor; only a hash of their bearer token is stored."""

    __tablename__ = "visitor_tokens"

    token_hash: str = Field(primary_key=True, max_length=64)
    visitor_id: str = Field(index=True, max_length=32)
    created_at: datetime = Field(default_factory=utcnow)


def table_of(model: type[SQLModel]) -> Table:
    """The Core table of a table model, for SQL written against columns (typed, unlike `__table__`)."""
    table = inspect_mapping(model).local_table
    if not isinstance(table, Table):
        raise TypeError(f"{model.__name__} is not mapped to a table")
    return table
