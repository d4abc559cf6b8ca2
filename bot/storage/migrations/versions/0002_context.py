"""context records: compaction summaries, collapses, snips

Revision ID: 0002_context
Revises: 0001_initial
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0002_context"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "context_records",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("first_seq", sa.Integer(), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("focus", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_id", "kind", "first_seq"),
    )
    with op.batch_alter_table("context_records", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_context_records_session_id"), ["session_id"], unique=False)

    op.create_table(
        "context_snips",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("first_seq", sa.Integer(), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("undone_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("context_snips", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_context_snips_session_id"), ["session_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("context_snips", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_context_snips_session_id"))
    op.drop_table("context_snips")
    with op.batch_alter_table("context_records", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_context_records_session_id"))
    op.drop_table("context_records")
