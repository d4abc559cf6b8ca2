"""delivery state of each turn (lane, chat, draft, owner) for shutdown and crash recovery

Revision ID: 0005_deliveries
Revises: 0004_recall
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0005_deliveries"
down_revision = "0004_recall"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("user_message_id", sa.Integer(), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("ingest_key", sqlmodel.sql.sqltypes.AutoString(length=300), nullable=False),
        sa.Column("lane", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("chat_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("chat_kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("thread_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
        sa.Column("platform_message_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("draft_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("owner", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("user_message_id"),
        sa.UniqueConstraint("ingest_key"),
    )
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_deliveries_created_at"), ["created_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_deliveries_created_at"))
    op.drop_table("deliveries")
