"""a reply's own provider blocks (signed thinking) and the prompt tokens its turn was billed

Revision ID: 0020_provider_blocks
Revises: 0019_model_choice

`messages.provider_blocks` keeps an answer in its provider's own content blocks, as JSON
({"provider": "anthropic", "blocks": [...]}), on the `tool_call` row or reply they belong
to: Anthropic wants a thinking block back unchanged, signature and all, with the tool calls
it led to. `messages.prompt_tokens`, `cached_tokens` and `cache_write_tokens` are what the
server reported for the model calls of the turn a reply ends (NULL: it reported nothing).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_provider_blocks"
down_revision = "0019_model_choice"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("provider_blocks", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("prompt_tokens", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("cached_tokens", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("cache_write_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("cache_write_tokens")
        batch_op.drop_column("cached_tokens")
        batch_op.drop_column("prompt_tokens")
        batch_op.drop_column("provider_blocks")
