"""The model_profiles table: read a model's profile, and write what a call taught.

Every process reads the row before each model call (one primary-key read), so a window
one process learned holds for every process on the same database.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import or_, select
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlalchemy.exc import IntegrityError

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

    def save_ratio(self, model: str, ratio: float, samples: int) -> None:
        """Stores the model's calibration; its window fields stay as whoever stored them."""
        self._update(model, ratio=ratio, samples=samples)

    def save_stated(self, model: str, stated: int) -> None:
        """Stores the window the model's server states."""
        self._update(model, stated_window=stated)

    def learn_window(self, model: str, window: int, under: int | None) -> int:
        """Lowers the model's learned window to `window` (never raises it); the window now stored.

        One conditional UPDATE, so two processes learning at once keep the smaller lesson.
        """
        self._ensure_row(model)
        with self.database.begin() as connection:
            connection.execute(
                PROFILES.update()
                .where(
                    PROFILES.c.model == model,
                    or_(PROFILES.c.learned_window.is_(None), PROFILES.c.learned_window > window),
                )
                .values(learned_window=window, learned_under=under, updated_at=utcnow())
            )
            stored = connection.execute(
                select(PROFILES.c.learned_window).where(PROFILES.c.model == model)
            ).scalar_one()
        return int(stored)

    def _update(self, model: str, **values: object) -> None:
        # Only the columns given: a process storing a ratio never undoes another's lesson.
        self._ensure_row(model)
        with self.database.begin() as connection:
            connection.execute(
                PROFILES.update().where(PROFILES.c.model == model).values(**values, updated_at=utcnow())
            )

    def _ensure_row(self, model: str) -> None:
        """The model's row exists: inserted when missing, even as another process inserts it too."""
        with self.database.connect() as connection:
            found = connection.execute(select(PROFILES.c.model).where(PROFILES.c.model == model)).first()
        if found is not None:
            return
        try:
            with self.database.begin() as connection:
                connection.execute(PROFILES.insert().values(model=model, samples=0, updated_at=utcnow()))
        except IntegrityError:
            # Another process inserted it between the read and the insert: it exists.
            return
