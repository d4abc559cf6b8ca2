"""Reminders people (or the model) asked for, and the time zone each owner reads times in."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Text
from sqlmodel import Field, SQLModel

from bot.storage.models import utcnow


class Reminder(SQLModel, table=True):
    """One reminder: whose it is, where it goes, what it says, when, and how far it got.

    `state`: `scheduled` (waiting for `due_at`), `delivering` (claimed by one run of its
    job), `delivered`, `cancelled`, `missed` (fell due while Chorus was down, longer ago
    than `reminders.max_late_seconds`) or `failed` (the platform refused; `failure` says
    why). A recurring reminder (`cron`) goes back to `scheduled` with its next `due_at`
    after each firing, and `occurrence` counts its firings: the job of one occurrence
    names it, so a job run twice, or a job of an earlier occurrence, claims nothing.
    """

    __tablename__ = "reminders"

    id: int | None = Field(default=None, primary_key=True)
    # Whose it is: a person, or a group route (as a session's owner).
    owner_kind: str = Field(max_length=16)
    owner_id: str = Field(index=True, max_length=256)
    session_id: str = Field(index=True, max_length=32)
    persona_id: str = Field(max_length=64)
    # Where it was asked, and so where it goes.
    lane: str = Field(max_length=16)
    chat_id: str = Field(max_length=128)
    chat_kind: str = Field(max_length=16)
    thread_id: str | None = Field(default=None, max_length=128)
    text: str = Field(sa_column=Column(Text, nullable=False))
    due_at: datetime = Field(index=True)
    # A recurring reminder's cron expression, read in `time_zone`.
    cron: str | None = Field(default=None, max_length=128)
    time_zone: str = Field(default="UTC", max_length=64)
    state: str = Field(default="scheduled", max_length=16)
    occurrence: int = 0
    # The run of its job that claimed it, and when (a claim of a run that died expires).
    claimed_by: str | None = Field(default=None, max_length=64)
    claimed_at: datetime | None = None
    # The last firing: when, whether it was late, the platform's message id, or why it failed.
    fired_at: datetime | None = None
    late: bool = False
    platform_message_id: str | None = Field(default=None, max_length=128)
    failure: str | None = Field(default=None, max_length=512)
    created_by: str | None = Field(default=None, max_length=160)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class OwnerTimeZone(SQLModel, table=True):
    """The time zone a person or group set with /timezone (others use the `timezone` setting)."""

    __tablename__ = "time_zones"

    owner_kind: str = Field(primary_key=True, max_length=16)
    owner_id: str = Field(primary_key=True, max_length=256)
    zone: str = Field(max_length=64)
    updated_at: datetime = Field(default_factory=utcnow)
