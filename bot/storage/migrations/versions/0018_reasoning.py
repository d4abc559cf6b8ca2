"""a session can show the model's thinking beside its replies

Revision ID: 0018_reasoning
Revises: 0017_model_profiles

A row in `reasoning_sessions` is `/reasoning on` for that session; no row (every existing
session) is off. The thinking itself needs no schema: it is a message row of kind `reasoning`.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0018_reasoning"
down_revision = "0017_model_profiles"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reasoning_sessions",
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id"),
    )


def downgrade() -> None:
    op.drop_table("reasoning_sessions")
