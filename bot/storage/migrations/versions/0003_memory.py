"""long-term memory items, offload cursors, recall index

Revision ID: 0003_memory
Revises: 0002_context
"""

from __future__ import annotations

revision = "0003_memory"
down_revision = "0002_context"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
