"""Stored rows as the widget shows them: messages, and events (commands, answers, switches).

Events are the `system` rows of a conversation; a reload shows them again, so the
history reads like the conversation the person had.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.history import StoredEntry
from bot.turns.engine import COMMAND_EVENT, COMMAND_REPLY_EVENT
from channels.web.schemas import AttachmentView, MessageView
from persona import PersonaRegistry

PERSONA_SWITCH = "persona switched from "
ERROR_EVENT = "error: "


def message_views(rows: Sequence[StoredEntry], personas: PersonaRegistry) -> list[MessageView]:
    return [message_view(row, personas) for row in rows]


def message_view(row: StoredEntry, personas: PersonaRegistry) -> MessageView:
    event, text = event_of(row, personas) if row.role == "system" else (None, row.content)
    return MessageView(
        id=row.id,
        seq=row.seq,
        role=row.role,
        event=event,
        text=text,
        status=row.status,
        persona_id=row.persona_id if row.role == "assistant" or event == "persona_switch" else None,
        persona_name=row.sender_name if row.role == "assistant" else None,
        sender_name=row.sender_name if row.role == "user" or event == "command" else None,
        lane=row.lane,
        created_at=row.created_at.isoformat(),
        attachments=[
            AttachmentView(
                id=item.id,
                kind=item.kind,
                filename=item.filename,
                mime_type=item.mime_type,
                size=item.size,
                url=f"/api/attachments/{item.id}",
            )
            for item in row.files
        ],
    )


def event_of(row: StoredEntry, personas: PersonaRegistry) -> tuple[str, str]:
    """The kind of a stored event and the text a person is shown for it."""
    content = row.content
    if content.startswith(COMMAND_EVENT):
        return "command", content.removeprefix(COMMAND_EVENT)
    if content.startswith(COMMAND_REPLY_EVENT):
        return "command_reply", content.removeprefix(COMMAND_REPLY_EVENT)
    if content.startswith(PERSONA_SWITCH) and row.persona_id is not None:
        return "persona_switch", f"Now speaking: {personas.resolve(row.persona_id).name}"
    if content.startswith(ERROR_EVENT):
        return "error", content.removeprefix(ERROR_EVENT)
    return "note", content
