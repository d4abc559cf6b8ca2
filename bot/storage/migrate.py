"""Apply Alembic migrations programmatically (on start and by `chorus db upgrade`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic is imported only when migrating: commands that just read start faster.
# The advisory-lock class that serialises migrations (see bot.liveness for the others).
MIGRATION_LOCK_CLASS = 7300
MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def alembic_config(database_url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser treats % as interpolation; URLs may contain escaped characters.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the database at `engine` up to `revision`."""
    from alembic import command

    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            # Processes starting together on one database migrate one after another; the
            # lock ends with this transaction.
            connection.execute(text("SELECT pg_advisory_xact_lock(:kind, 0)"), {"kind": MIGRATION_LOCK_CLASS})
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def head_revision() -> str:
    """The newest migration: revision ids are their file names, numbered in order."""
    return max(path.stem for path in (MIGRATIONS_DIR / "versions").glob("[0-9]*.py"))


def is_current(engine: Engine) -> bool:
    """Whether the database is at the head revision, read without loading Alembic (fast)."""
    with engine.connect() as connection:
        try:
            found = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
        except DBAPIError:
            return False
    return found == [head_revision()]


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()
