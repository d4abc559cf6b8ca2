"""tool call index: the console lists the newest tool calls of every conversation

Revision ID: 0023_tool_call_index
Revises: 0022_approvals
"""

from __future__ import annotations

from alembic import op

revision = "0023_tool_call_index"
down_revision = "0022_approvals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_messages_kind_id", "messages", ["kind", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_messages_kind_id", table_name="messages")
