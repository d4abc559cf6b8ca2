"""The Alembic migrations build exactly the schema the models describe."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

import bot.storage.tables  # noqa: F401
from bot.storage import migrate
from bot.storage.database import create_database_engine


def test_upgrade_to_head_matches_the_models(tmp_path):
    engine = create_database_engine(f"sqlite:///{tmp_path / 'schema.db'}")
    migrate.upgrade(engine)
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    # Full-text index tables are created by hand in migrations and have no model.
    differences = [d for d in differences if not (d[0] == "remove_table" and "fts" in d[1].name)]
    assert differences == []
    assert migrate.current_revision(engine) is not None
    engine.dispose()


def test_upgrade_is_idempotent(tmp_path):
    engine = create_database_engine(f"sqlite:///{tmp_path / 'twice.db'}")
    migrate.upgrade(engine)
    first = migrate.current_revision(engine)
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == first
    engine.dispose()
