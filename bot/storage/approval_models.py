"""Tool calls waiting for a person's yes or no, and what was decided, beside the call they hold."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from bot.storage.models import utcnow


class Approval(SQLModel, table=True):
    """One call's approval: asked, then decided once.

    `state`: `pending` (waiting until `expires_at`), `approved`, `denied`, `expired` (no
    answer in time: denied) or `cancelled` (the turn was stopped). Every move away from
    `pending` is one conditional UPDATE, so of two clicks (or two processes) one decides.
    `ran_by` names the process that claimed the approved call's run, by the same kind of
    UPDATE: an approved call runs once however many turns wait on it.
    """

    __tablename__ = "approvals"
    # One approval per stored call: the call's id alone is not enough, since some servers
    # number each answer's calls afresh (`call_0`).
    __table_args__ = (UniqueConstraint("session_id", "call_seq", "call_id", name="uq_approvals_call"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: str = Field(index=True, max_length=32)
    # The stored call it holds: the seq of the row that made the call, and the call's id
    # (`tool_call_id` of its result).
    call_seq: int
    call_id: str = Field(max_length=128)
    user_message_id: int
    tool_name: str = Field(max_length=160)
    # The arguments in short, as people are shown them.
    summary: str = Field(sa_column=Column(Text, nullable=False))
    # Who asked (`<lane>:<platform user id>`): they decide it when they are a member.
    asker: str | None = Field(default=None, max_length=200)
    asker_name: str | None = Field(default=None, max_length=160)
    state: str = Field(default="pending", index=True, max_length=16)
    decided_by: str | None = Field(default=None, max_length=200)
    decided_at: datetime | None = None
    expires_at: datetime
    ran_by: str | None = Field(default=None, max_length=64)
    # How the run ended ("ok" or "error"); None while not run.
    outcome: str | None = Field(default=None, max_length=16)
    created_at: datetime = Field(default_factory=utcnow)
