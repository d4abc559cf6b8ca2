"""context records: an index that finds a session's newest summary without reading the others

Revision ID: 0016_latest_context_record
Revises: 0015_stored_search_vectors

Every model call reads the newest summary of its session (`max(last_seq)` of its summaries)
and the collapses after it. With only the session indexed, both read every record the session
ever stored: a conversation compacted 2,500 times read 2,500 summaries twice a turn. On
(session, kind, last_seq) the newest summary is one index step.
"""

from __future__ import annotations

from alembic import op

revision = "0016_latest_context_record"
down_revision = "0015_stored_search_vectors"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("context_records") as batch:
        batch.create_index("ix_context_records_latest", ["session_id", "kind", "last_seq"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("context_records") as batch:
        batch.drop_index("ix_context_records_latest")
