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


def test_the_recall_migration_dates_old_items_and_reindexes_old_messages(tmp_path):
    from datetime import UTC, datetime

    from sqlalchemy import text

    from bot.storage.memory_store import MemoryStore, Owner
    from bot.storage.store import NewMessage, Store

    engine = create_database_engine(f"sqlite:///{tmp_path / 'old.db'}")
    migrate.upgrade(engine, "0003_memory")
    said = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    store = Store(engine)
    chat = store.create_session("group", "group", "web:g1", "ada")
    with engine.begin() as connection:
        # A message and an item as the release before this migration wrote them.
        connection.execute(
            text(
                "INSERT INTO messages (session_id, seq, role, content, sender_name, token_count, "
                "attachment_count, status, created_at) VALUES (:session, 1, 'user', "
                "'I adopted a puppy yesterday.', 'Caroline', 5, 0, 'complete', :said)"
            ),
            {"session": chat.id, "said": said},
        )
        connection.execute(text("UPDATE sessions SET last_seq = 1"))
        connection.execute(
            text("INSERT INTO messages_fts(rowid, owner, content) SELECT id, 'x', content FROM messages")
        )
        connection.execute(
            text(
                "INSERT INTO memory_items (owner_kind, owner_id, session_id, source_seq, kind, content, "
                "search_text, content_key, importance, source, mentions, created_at, updated_at) VALUES "
                "('group', 'web:g1', :session, 1, 'fact', 'Caroline: I adopted a puppy yesterday.', "
                "'caroline adopted puppy yesterday', 'k', 5, 'rules', 1, :now, :now)"
            ),
            {"session": chat.id, "now": datetime(2026, 1, 1, tzinfo=UTC)},
        )
    migrate.upgrade(engine)
    memory = MemoryStore(engine)
    item = memory.all_items(Owner("group", "web:g1"))[0]
    assert (item.source_seq, item.source_last_seq) == (1, 1)
    assert item.said_at is not None and item.said_at.date().isoformat() == "2023-05-08"
    # The old message is now found by its sender's name and by the day it talks about.
    found = memory.full_text(Owner("group", "web:g1"), ["caroline"], 5)
    assert [hit.seq for hit in found["message"]] == [1]
    assert [hit.id for hit in memory.full_text(Owner("group", "web:g1"), ["d20230507"], 5)["memory"]] == [1]
    store.append(chat.id, NewMessage(role="user", content="New one.", token_count=1, sender_name="Mel"))
    assert [hit.seq for hit in memory.full_text(Owner("group", "web:g1"), ["mel"], 5)["message"]] == [2]
    engine.dispose()
