"""Apply Alembic migrations programmatically (on start and by `chorus db upgrade`).

Revisions live in `migrations/versions/` as `NNNN_name.py` with the revision id equal to
the file's stem, each revising the one before (tests/core/test_migrations.py checks it).
That makes the newest file the head, so a database already at head is recognised with
one query, without importing Alembic: every command start pays for it otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine as DatabaseEngine

if TYPE_CHECKING:
    from alembic.config import Config

# The advisory-lock class that serialises migrations (see bot.liveness for the others).
MIGRATION_LOCK_CLASS = 7300
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
VERSIONS_DIR = MIGRATIONS_DIR / "versions"


def alembic_config(database_url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser treats % as interpolation; URLs may contain escaped characters.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def head_revision() -> str:
    """The newest revision: the highest-numbered file in the versions folder."""
    return max(path.stem for path in VERSIONS_DIR.glob("[0-9][0-9][0-9][0-9]_*.py"))


def upgrade(engine: DatabaseEngine, revision: str = "head") -> None:
    """Bring the database at `engine` up to `revision`."""
    if revision == "head" and current_revision(engine) == head_revision():
        return
    from alembic import command

    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            # Processes starting together on one database migrate one after another; the
            # lock ends with this transaction.
            connection.execute(text("SELECT pg_advisory_xact_lock(:kind, 0)"), {"kind": MIGRATION_LOCK_CLASS})
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def current_revision(engine: DatabaseEngine) -> str | None:
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        found = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    # Several rows would mean branches, which this history never has.
    return found[0] if len(found) == 1 else None


def is_current(engine: DatabaseEngine) -> bool:
    """Whether the database is at the head revision, read without loading Alembic."""
    return current_revision(engine) == head_revision()
