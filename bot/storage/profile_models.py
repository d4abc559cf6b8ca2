"""What Chorus learned about each model it talks to: its window and how its tokenizer counts."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from bot.storage.models import utcnow


class ModelProfile(SQLModel, table=True):
    """One model, by the name requests carry (`model.name`, a persona's or a conversation's model).

    `stated_window`: the window its server states (`bot.providers.discovery`), as last asked.
    `learned_window`: the window an overflow error taught, and `learned_under` the stated
    window at the time — a server restarted with another window makes the lesson stale.
    `ratio`: the server's prompt tokens per token Chorus counts, from `samples` answers.
    """

    __tablename__ = "model_profiles"

    model: str = Field(primary_key=True, max_length=256)
    stated_window: int | None = None
    learned_window: int | None = None
    learned_under: int | None = None
    ratio: float | None = None
    samples: int = 0
    updated_at: datetime = Field(default_factory=utcnow)
