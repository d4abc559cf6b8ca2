"""After-turn jobs waiting to run, on SQLite (PostgreSQL keeps them in procrastinate's tables)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from bot.storage.models import utcnow


class QueuedJob(SQLModel, table=True):
    """One job of one session, written in the transaction of the message that asked for it.

    A row exists until the job has run (then it is deleted). `claimed_by` names the
    process running it; a claim of a process that is gone is released on start, so a
    job enqueued before a crash runs after it. While a row waits unclaimed, a second
    request for the same job and session joins it (the partial unique index): a job
    reads the session as it is when it runs, so one run covers both.
    """

    __tablename__ = "jobs"
    __table_args__ = (
        sa.Index(
            "ix_jobs_waiting",
            "name",
            "session_id",
            unique=True,
            sqlite_where=sa.text("claimed_by IS NULL"),
            postgresql_where=sa.text("claimed_by IS NULL"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=64)
    session_id: str = Field(max_length=32)
    # The seq of the message whose transaction enqueued the job.
    seq: int
    run_after: datetime = Field(default_factory=utcnow, index=True)
    claimed_by: str | None = Field(default=None, max_length=64)
    attempts: int = 0
    created_at: datetime = Field(default_factory=utcnow)
