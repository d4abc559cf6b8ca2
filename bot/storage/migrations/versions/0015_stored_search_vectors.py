"""PostgreSQL: messages and memory items keep their search vector, instead of every search computing it

Revision ID: 0015_stored_search_vectors
Revises: 0014_reminders

Recall on PostgreSQL matched and ranked `to_tsvector('english', search_text)`, which the
GIN index holds but a row does not: every search computed the vector again for each of the
owner's rows it considered (most of a search's time for a long conversation). A stored
generated column `search_vector` now holds it, computed once when the row is written, and
the GIN indexes cover that column. SQLite is unchanged (FTS5 stores its own index).
"""

from __future__ import annotations

from alembic import op

revision = "0015_stored_search_vectors"
down_revision = "0014_reminders"
branch_labels = None
depends_on = None

_INDEXES = {"ix_messages_fts_search": "messages_fts", "ix_memory_items_fts": "memory_items"}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, table in _INDEXES.items():
        op.execute(f"DROP INDEX IF EXISTS {name}")
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN search_vector tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english', search_text)) STORED"
        )
        op.execute(f"CREATE INDEX {name} ON {table} USING gin (search_vector)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, table in _INDEXES.items():
        op.execute(f"DROP INDEX IF EXISTS {name}")
        op.execute(f"ALTER TABLE {table} DROP COLUMN search_vector")
        op.execute(f"CREATE INDEX {name} ON {table} USING gin (to_tsvector('english', search_text))")
