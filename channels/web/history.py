"""Stored rows as the widget shows them: messages, and events (commands, answers, switches).

Events are the `system` rows of a conversation; a reload shows them again, so the
history reads like the conversation the person had. Each row's kind says what it is
(`transcript.kinds`); the widget's `event` names the kind of an event.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.history import StoredEntry
from channels.web.schemas import AttachmentView, MessageView
from persona import PersonaRegistry
from transcript.kinds import UnknownMessageKind


def message_views(rows: Sequence[StoredEntry], personas: PersonaRegistry) -> list[MessageView]:
    return [message_view(row, personas) for row in rows]


def message_view(row: StoredEntry, personas: PersonaRegistry) -> MessageView:
    event, text = event_of(row, personas)
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


def event_of(row: StoredEntry, personas: PersonaRegistry) -> tuple[str | None, str]:
    """The widget's event name for the row (None for a message) and the text a person is shown."""
    match row.kind:
        case "message":
            return None, row.content
        case "persona_switch" if row.persona_id is not None:
            return "persona_switch", f"Now speaking: {personas.resolve(row.persona_id).name}"
        case "persona_switch":
            return "note", row.content
        case "command" | "command_reply" | "error" | "note":
            return row.kind, row.content
    raise UnknownMessageKind(f"the widget cannot show a {row.kind!r} row")
