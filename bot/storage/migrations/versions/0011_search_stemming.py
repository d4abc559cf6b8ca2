"""PostgreSQL: full-text search stems words, as SQLite's porter tokenizer does

Revision ID: 0011_search_stemming
Revises: 0010_compact_storage

Messages and memory items were indexed on PostgreSQL with the `simple` configuration:
"painting" did not find "painted", nor "kids" find "kid", while SQLite's index (the
porter tokenizer) found both, so the same conversation recalled less on PostgreSQL.
The GIN indexes are rebuilt over `to_tsvector('english', ...)` (the Snowball English
stemmer; the index text has already lost its stop words) and recall queries with the
same configuration. SQLite is unchanged.
"""

from __future__ import annotations

from alembic import op

revision = "0011_search_stemming"
down_revision = "0010_compact_storage"
branch_labels = None
depends_on = None


_INDEXES = {"ix_messages_fts_search": "messages_fts", "ix_memory_items_fts": "memory_items"}


def _index(config: str) -> None:
    for name, table in _INDEXES.items():
        op.execute(f"DROP INDEX IF EXISTS {name}")
        op.execute(f"CREATE INDEX {name} ON {table} USING gin (to_tsvector('{config}', search_text))")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _index("english")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _index("simple")
