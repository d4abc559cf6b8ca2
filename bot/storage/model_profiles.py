"""The model_profiles table: read a model's profile, and write what a call taught.

Every process reads the row before each model call (one primary-key read), so a window
one process learned holds for every process on the same database.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.engine import Engine as DatabaseEngine

from bot.storage.models import table_of, utcnow
from bot.storage.profile_models import ModelProfile

PROFILES = table_of(ModelProfile)


@dataclass(frozen=True)
class StoredProfile:
    """A model's row as read; every field None (samples 0) for a model never seen."""

    stated_window: int | None = None
    learned_window: int | None = None
    learned_under: int | None = None
    ratio: float | None = None
    samples: int = 0


class ModelProfileStore:
    def __init__(self, database: DatabaseEngine) -> None:
        self.database = database

    def read(self, model: str) -> StoredProfile:
        with self.database.connect() as connection:
            row = connection.execute(select(PROFILES).where(PROFILES.c.model == model)).mappings().first()
        if row is None:
            return StoredProfile()
        return StoredProfile(
            stated_window=row["stated_window"],
            learned_window=row["learned_window"],
            learned_under=row["learned_under"],
            ratio=row["ratio"],
            samples=row["samples"],
        )

    def write(self, model: str, profile: StoredProfile) -> None:
        """Stores `profile` as the model's row (inserted the first time)."""
        values = {
            "stated_window": profile.stated_window,
            "learned_window": profile.learned_window,
            "learned_under": profile.learned_under,
            "ratio": profile.ratio,
            "samples": profile.samples,
            "updated_at": utcnow(),
        }
        with self.database.begin() as connection:
            updated = connection.execute(PROFILES.update().where(PROFILES.c.model == model).values(**values))
            if updated.rowcount == 0:
                connection.execute(PROFILES.insert().values(model=model, **values))

    def learn_window(self, model: str, window: int, under: int | None) -> int:
        """Lowers the model's learned window to `window` (never raises it); the window now stored.

        One conditional UPDATE, so two processes learning at once keep the smaller lesson.
        """
        with self.database.begin() as connection:
            current = connection.execute(
                select(PROFILES.c.learned_window).where(PROFILES.c.model == model)
            ).first()
            if current is None:
                connection.execute(
                    PROFILES.insert().values(
                        model=model,
                        learned_window=window,
                        learned_under=under,
                        samples=0,
                        updated_at=utcnow(),
                    )
                )
                return window
            stored = current[0]
            if stored is not None and stored <= window:
                return int(stored)
            connection.execute(
                PROFILES.update()
                .where(PROFILES.c.model == model)
                .values(learned_window=window, learned_under=under, updated_at=utcnow())
            )
            return window
