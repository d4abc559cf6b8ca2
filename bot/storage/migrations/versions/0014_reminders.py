"""reminders: what people asked to be reminded of, and each owner's time zone

Revision ID: 0014_reminders
Revises: 0013_voice
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0014_reminders"
down_revision = "0013_voice"
branch_labels = None
depends_on = None


def _text(length: int) -> sqlmodel.sql.sqltypes.AutoString:
    return sqlmodel.sql.sqltypes.AutoString(length=length)


def upgrade() -> None:
    op.create_table(
        "reminders",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_kind", _text(16), nullable=False),
        sa.Column("owner_id", _text(256), nullable=False),
        sa.Column("session_id", _text(32), nullable=False),
        sa.Column("persona_id", _text(64), nullable=False),
        sa.Column("lane", _text(16), nullable=False),
        sa.Column("chat_id", _text(128), nullable=False),
        sa.Column("chat_kind", _text(16), nullable=False),
        sa.Column("thread_id", _text(128), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cron", _text(128), nullable=True),
        sa.Column("time_zone", _text(64), nullable=False),
        sa.Column("state", _text(16), nullable=False),
        sa.Column("occurrence", sa.Integer(), nullable=False),
        sa.Column("claimed_by", _text(64), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("fired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("late", sa.Boolean(), nullable=False),
        sa.Column("platform_message_id", _text(128), nullable=True),
        sa.Column("failure", _text(512), nullable=True),
        sa.Column("created_by", _text(160), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("reminders") as batch:
        batch.create_index(batch.f("ix_reminders_owner_id"), ["owner_id"], unique=False)
        batch.create_index(batch.f("ix_reminders_session_id"), ["session_id"], unique=False)
        batch.create_index(batch.f("ix_reminders_due_at"), ["due_at"], unique=False)
    op.create_table(
        "time_zones",
        sa.Column("owner_kind", _text(16), nullable=False),
        sa.Column("owner_id", _text(256), nullable=False),
        sa.Column("zone", _text(64), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("owner_kind", "owner_id"),
    )


def downgrade() -> None:
    op.drop_table("time_zones")
    with op.batch_alter_table("reminders") as batch:
        batch.drop_index(batch.f("ix_reminders_due_at"))
        batch.drop_index(batch.f("ix_reminders_session_id"))
        batch.drop_index(batch.f("ix_reminders_owner_id"))
    op.drop_table("reminders")
