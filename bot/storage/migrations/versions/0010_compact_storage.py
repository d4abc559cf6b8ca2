"""compact storage: vectors as int8, finished deliveries dropped

Stored embeddings were float32 (1,536 bytes for all-MiniLM-L6-v2); they become int8
scaled to their largest component (384 bytes), which keeps their direction, all that
cosine similarity reads (`bot.memory.dense.to_blob`). A delivery row is only needed
until its turn is delivered; rows of delivered turns are dropped, as the lanes now
drop them when they finish showing a reply.

Pure Python, so it runs without the dense extra installed.

Revision ID: 0010_compact_storage
Revises: 0009_message_kind
"""

from __future__ import annotations

from array import array

import sqlalchemy as sa
from alembic import op

revision = "0010_compact_storage"
down_revision = "0009_message_kind"
branch_labels = None
depends_on = None

BATCH = 500


def compact(blob: bytes) -> bytes:
    values = array("f")
    values.frombytes(blob)
    peak = max((abs(value) for value in values), default=0.0)
    scale = 127.0 / peak if peak else 0.0
    return array("b", (max(-127, min(127, round(value * scale))) for value in values)).tobytes()


def _convert(table: str, key: str, column: str) -> None:
    connection = op.get_bind()
    after = -1
    while True:
        rows = connection.execute(
            sa.text(
                f"SELECT {key}, {column} FROM {table} WHERE {column} IS NOT NULL AND {key} > :after "
                f"ORDER BY {key} LIMIT {BATCH}"
            ),
            {"after": after},
        ).all()
        if not rows:
            return
        connection.execute(
            sa.text(f"UPDATE {table} SET {column} = :vector WHERE {key} = :key"),
            [{"key": row[0], "vector": compact(bytes(row[1]))} for row in rows],
        )
        after = rows[-1][0]


def upgrade() -> None:
    _convert("message_embeddings", "message_id", "vector")
    _convert("memory_items", "id", "embedding")
    op.execute("DELETE FROM deliveries WHERE state = 'delivered'")


def downgrade() -> None:
    # int8 vectors cannot become the float32 ones again: drop them, `chorus memory reindex`
    # (or the backfill at `chorus serve`) embeds the rows anew.
    op.execute("DELETE FROM message_embeddings")
    op.execute("UPDATE memory_items SET embedding = NULL")
