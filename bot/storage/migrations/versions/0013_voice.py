"""voice notes keep their measured length; a session can have its replies spoken

Revision ID: 0013_voice
Revises: 0012_tool_rows

`attachments.duration_seconds` is the length of a voice note or audio file, measured by
decoding it at arrival (its transcript goes in `text`, like a document's text). A row in
`spoken_sessions` is `/voice on` for that session; no row (every existing session) is off.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0013_voice"
down_revision = "0012_tool_rows"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attachments", schema=None) as batch_op:
        batch_op.add_column(sa.Column("duration_seconds", sa.Float(), nullable=True))
    op.create_table(
        "spoken_sessions",
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("session_id"),
    )


def downgrade() -> None:
    op.drop_table("spoken_sessions")
    with op.batch_alter_table("attachments", schema=None) as batch_op:
        batch_op.drop_column("duration_seconds")
