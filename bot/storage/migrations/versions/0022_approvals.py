"""approvals: tool calls waiting for a person's yes or no, and what was decided

Revision ID: 0022_approvals
Revises: 0021_access
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0022_approvals"
down_revision = "0021_access"
branch_labels = None
depends_on = None


def _text(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def upgrade() -> None:
    op.create_table(
        "approvals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", _text(32), nullable=False),
        sa.Column("call_seq", sa.Integer(), nullable=False),
        sa.Column("call_id", _text(128), nullable=False),
        sa.Column("user_message_id", sa.Integer(), nullable=False),
        sa.Column("tool_name", _text(160), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("asker", _text(200), nullable=True),
        sa.Column("asker_name", _text(160), nullable=True),
        sa.Column("state", _text(16), nullable=False),
        sa.Column("decided_by", _text(200), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ran_by", _text(64), nullable=True),
        sa.Column("outcome", _text(16), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("session_id", "call_seq", "call_id", name="uq_approvals_call"),
    )
    with op.batch_alter_table("approvals") as batch:
        batch.create_index(batch.f("ix_approvals_session_id"), ["session_id"], unique=False)
        batch.create_index(batch.f("ix_approvals_state"), ["state"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.drop_index(batch.f("ix_approvals_state"))
        batch.drop_index(batch.f("ix_approvals_session_id"))
    op.drop_table("approvals")
