"""a conversation's model and thinking level; the model that answered each reply

Revision ID: 0019_model_choice
Revises: 0018_reasoning

`sessions.model_choice` is the `models:` entry picked with /model (NULL: the persona's
model) and `sessions.thinking` the /think level, read with the session so a turn needs no
extra query. `messages.model` is the model that answered a reply: with failover it may
be a fallback's.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0019_model_choice"
down_revision = "0018_reasoning"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("model_choice", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True)
        )
        batch_op.add_column(sa.Column("thinking", sqlmodel.sql.sqltypes.AutoString(length=8), nullable=True))
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("model", sqlmodel.sql.sqltypes.AutoString(length=256), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("model")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_column("thinking")
        batch_op.drop_column("model_choice")
