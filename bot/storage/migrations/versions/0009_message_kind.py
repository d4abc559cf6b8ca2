"""messages.kind: what a stored row is, instead of a prefix in its text

Revision ID: 0009_message_kind
Revises: 0008_message_search

Until now an event was a `system` row whose content started with a tag, and every
reader guessed the event from it: "command: " (a command as sent), "command reply: "
(its answer), "persona switched from " (a persona switch) and "error: " (why a turn
got no reply). Each row now names its kind (`transcript.kinds`): `message` for user and
assistant rows, `command`, `command_reply`, `persona_switch`, `error`, and `note` for any
other event.

The tags are stripped from the content of commands, command replies and errors: with
the kind in its own column, the content holds exactly what was sent or shown, so the
widget, the console and an export show it without knowing any tag, and no new row ever
carries one. A persona switch keeps its sentence ("persona switched from a to b"): it is
the event's text, not a tag before it. Downgrading puts the tags back.
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "0009_message_kind"
down_revision = "0008_message_search"
branch_labels = None
depends_on = None

# (kind, the tag its rows' content started with, whether the tag is stripped), checked in this
# order. "command reply: " does not start with "command: ", so the order is only for clarity.
_TAGGED = (
    ("command_reply", "command reply: ", True),
    ("command", "command: ", True),
    ("persona_switch", "persona switched from ", False),
    ("error", "error: ", True),
)


def _starts_with(tag: str) -> str:
    # substr, not LIKE: LIKE ignores case on SQLite and treats "_" as a wildcard.
    return f"substr(content, 1, {len(tag)}) = '{tag}'"


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(
            sa.Column(
                "kind", sqlmodel.sql.sqltypes.AutoString(length=24), nullable=False, server_default="message"
            )
        )
    for event, tag, stripped in _TAGGED:
        content = f"substr(content, {len(tag) + 1})" if stripped else "content"
        op.execute(
            f"UPDATE messages SET kind = '{event}', content = {content} "
            f"WHERE role = 'system' AND kind = 'message' AND {_starts_with(tag)}"
        )
    op.execute("UPDATE messages SET kind = 'note' WHERE role = 'system' AND kind = 'message'")


def downgrade() -> None:
    for kind, tag, stripped in _TAGGED:
        if stripped:
            op.execute(f"UPDATE messages SET content = '{tag}' || content WHERE kind = '{kind}'")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("kind")
