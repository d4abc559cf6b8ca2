"""The `pairings` table: strangers waiting for an admin's approval, and those approved."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from bot.storage.models import utcnow


class Pairing(SQLModel, table=True):
    """One stranger on one lane: a pending code, or (approved_at set) a member for good."""

    __tablename__ = "pairings"
    __table_args__ = (UniqueConstraint("lane", "platform_user_id"),)

    id: int | None = Field(default=None, primary_key=True)
    lane: str = Field(max_length=16)
    platform_user_id: str = Field(max_length=128)
    display_name: str = Field(default="", max_length=256)
    code: str = Field(index=True, max_length=16)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    expires_at: datetime
    approved_at: datetime | None = None
