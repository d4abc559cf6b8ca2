"""model profiles: each model's stated and learned window, and how its tokenizer counts against Chorus's

Revision ID: 0017_model_profiles
Revises: 0016_latest_context_record
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0017_model_profiles"
down_revision = "0016_latest_context_record"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "model_profiles",
        sa.Column("model", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=False),
        sa.Column("stated_window", sa.Integer(), nullable=True),
        sa.Column("learned_window", sa.Integer(), nullable=True),
        sa.Column("learned_under", sa.Integer(), nullable=True),
        sa.Column("ratio", sa.Float(), nullable=True),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("model"),
    )


def downgrade() -> None:
    op.drop_table("model_profiles")
