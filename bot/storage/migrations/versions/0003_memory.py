"""long-term memory items, offload cursors, recall index

Revision ID: 0003_memory
Revises: 0002_context

Full-text search: on SQLite, FTS5 tables kept in step with `memory_items` and
`messages` by triggers (the porter stemmer over unicode61 words); on PostgreSQL,
GIN indexes over the same `to_tsvector('simple', ...)` expressions the recall
queries use.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0003_memory"
down_revision = "0002_context"
branch_labels = None
depends_on = None

_FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"


def _fts_statements(table: str, column: str) -> list[str]:
    index = f"{table}_fts"
    return [
        f"CREATE VIRTUAL TABLE {index} USING fts5({column}, content='{table}', "
        f"content_rowid='id', tokenize='{_FTS_TOKENIZER}')",
        f"CREATE TRIGGER {index}_insert AFTER INSERT ON {table} BEGIN "
        f"INSERT INTO {index}(rowid, {column}) VALUES (new.id, new.{column}); END",
        f"CREATE TRIGGER {index}_delete AFTER DELETE ON {table} BEGIN "
        f"INSERT INTO {index}({index}, rowid, {column}) VALUES ('delete', old.id, old.{column}); END",
        f"CREATE TRIGGER {index}_update AFTER UPDATE OF {column} ON {table} BEGIN "
        f"INSERT INTO {index}({index}, rowid, {column}) VALUES ('delete', old.id, old.{column}); "
        f"INSERT INTO {index}(rowid, {column}) VALUES (new.id, new.{column}); END",
        # Messages stored before this migration become searchable too.
        f"INSERT INTO {index}({index}) VALUES ('rebuild')",
    ]


def upgrade() -> None:
    op.create_table(
        "memory_items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("owner_id", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("source_seq", sa.Integer(), nullable=True),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("search_text", sa.Text(), nullable=False),
        sa.Column("content_key", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("importance", sa.Integer(), nullable=False),
        sa.Column("source", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("mentions", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        batch_op.create_index("ix_memory_items_owner", ["owner_kind", "owner_id", "updated_at"], unique=False)
        batch_op.create_index(
            "ix_memory_items_owner_key", ["owner_kind", "owner_id", "content_key"], unique=False
        )

    op.create_table(
        "memory_cursors",
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("owner_kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("owner_id", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("offloads", sa.Integer(), nullable=False),
        sa.Column("written", sa.Integer(), nullable=False),
        sa.Column("merged", sa.Integer(), nullable=False),
        sa.Column("deduped", sa.Integer(), nullable=False),
        sa.Column("resets", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id"),
    )
    with op.batch_alter_table("memory_cursors", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_memory_cursors_owner_id"), ["owner_id"], unique=False)

    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for statement in _fts_statements("memory_items", "search_text") + _fts_statements(
            "messages", "content"
        ):
            op.execute(statement)
    elif dialect == "postgresql":
        op.execute(
            "CREATE INDEX ix_memory_items_fts ON memory_items USING gin (to_tsvector('simple', search_text))"
        )
        op.execute("CREATE INDEX ix_messages_fts ON messages USING gin (to_tsvector('simple', content))")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for index in ("memory_items_fts", "messages_fts"):
            for suffix in ("insert", "delete", "update"):
                op.execute(f"DROP TRIGGER IF EXISTS {index}_{suffix}")
            op.execute(f"DROP TABLE IF EXISTS {index}")
    elif dialect == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_messages_fts")
        op.execute("DROP INDEX IF EXISTS ix_memory_items_fts")
    with op.batch_alter_table("memory_cursors", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_cursors_owner_id"))
    op.drop_table("memory_cursors")
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        batch_op.drop_index("ix_memory_items_owner_key")
        batch_op.drop_index("ix_memory_items_owner")
    op.drop_table("memory_items")
