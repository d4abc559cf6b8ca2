"""messages: the calls of a tool_call row, and the call a tool_result row answers

Revision ID: 0012_tool_rows
Revises: 0011_search_stemming

A turn may call tools: the assistant row that called them keeps its calls (JSON: id,
name and the arguments as the model wrote them), and each result row names the call it
answers and the tool. Rows stored before have none of them.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0012_tool_rows"
down_revision = "0011_search_stemming"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("tool_calls", sa.Text(), nullable=True))
        batch.add_column(
            sa.Column("tool_call_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True)
        )
        batch.add_column(sa.Column("tool_name", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("tool_name")
        batch.drop_column("tool_call_id")
        batch.drop_column("tool_calls")
