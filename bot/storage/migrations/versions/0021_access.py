"""access: pairing codes strangers get in a DM, and the strangers an admin approved

Revision ID: 0021_access
Revises: 0020_provider_blocks
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021_access"
down_revision = "0020_provider_blocks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pairings",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("lane", sa.String(length=16), nullable=False),
        sa.Column("platform_user_id", sa.String(length=128), nullable=False),
        sa.Column("display_name", sa.String(length=256), nullable=False),
        sa.Column("code", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("approved_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("lane", "platform_user_id"),
    )
    op.create_index("ix_pairings_code", "pairings", ["code"])
    op.create_index("ix_pairings_created_at", "pairings", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_pairings_created_at", table_name="pairings")
    op.drop_index("ix_pairings_code", table_name="pairings")
    op.drop_table("pairings")
