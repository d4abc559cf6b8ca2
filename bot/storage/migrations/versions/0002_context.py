"""context records: compaction summaries, collapses, snips

Revision ID: 0002_context
Revises: 0001_initial
"""

from __future__ import annotations

revision = "0002_context"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
