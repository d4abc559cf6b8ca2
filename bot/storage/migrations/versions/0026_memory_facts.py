"""memory items say whom they are about and who said them, and when a newer one replaced them

Revision ID: 0026_memory_facts
Revises: 0023_tool_call_index

`about` is the person an item is about and `said_by` / `said_by_name` the person who said it
(NULL for what the assistant said, and for items stored before). `slot` names what the item
states of its subject ("priya|lives_in"), for the offline rules that find the item a newer
one replaces; `superseded_by` is that newer item and `valid_until` when the old one stopped
holding. A replaced item is kept as history, never deleted.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0026_memory_facts"
down_revision = "0023_tool_call_index"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("about", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=True))
        batch_op.add_column(sa.Column("said_by", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=True))
        batch_op.add_column(
            sa.Column("said_by_name", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=True)
        )
        batch_op.add_column(sa.Column("slot", sqlmodel.sql.sqltypes.AutoString(length=160), nullable=True))
        batch_op.add_column(sa.Column("superseded_by", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("valid_until", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_memory_items_owner_slot", "memory_items", ["owner_kind", "owner_id", "slot"])


def downgrade() -> None:
    op.drop_index("ix_memory_items_owner_slot", table_name="memory_items")
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        for column in ("valid_until", "superseded_by", "slot", "said_by_name", "said_by", "about"):
            batch_op.drop_column(column)
