"""Stored rows as the widget shows them: messages, and events (commands, answers, switches).

Events are the `system` rows of a conversation; a reload shows them again, so the
history reads like the conversation the person had. Each row's kind says what it is
(`transcript.kinds`); the widget's `event` names the kind of an event.

Tool rows show what the visitor saw while the reply streamed: a `tool_call` row is a
`tool` event of one progress line per call ("🔧 recall: dentist", and in `tools` each call's
words for the widget, which draws its own mark); results are left out.
A result is raw output meant for the model (another conversation's memory items, a
context report, a web page), not something a visitor should read.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.history import StoredEntry
from bot.turns.events import ToolStep
from bot.turns.round_calls import progress_summary
from channels.web.schemas import AttachmentView, MessageView, ToolLineView
from persona import PersonaRegistry
from transcript.kinds import UnknownMessageKind
from transcript.rows import StoredToolCall


def message_views(rows: Sequence[StoredEntry], personas: PersonaRegistry) -> list[MessageView]:
    return [message_view(row, personas) for row in rows if row.kind != "tool_result"]


def message_view(row: StoredEntry, personas: PersonaRegistry) -> MessageView:
    event, text = event_of(row, personas)
    return MessageView(
        id=row.id,
        seq=row.seq,
        role="system" if event == "tool" else row.role,
        event=event,
        text=text,
        status=row.status,
        persona_id=row.persona_id if row.role == "assistant" or event == "persona_switch" else None,
        persona_name=row.sender_name if row.role == "assistant" and event is None else None,
        sender_name=row.sender_name if row.role == "user" or event == "command" else None,
        lane=row.lane,
        created_at=row.created_at.isoformat(),
        tools=[tool_line(call) for call in row.tool_calls] if event == "tool" else [],
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
        case "reminder":
            # A persona's message the widget shows like any other, marked as a reminder.
            return "reminder", row.content
        case "persona_switch" if row.persona_id is not None:
            return "persona_switch", f"Now speaking: {personas.resolve(row.persona_id).name}"
        case "persona_switch":
            return "note", row.content
        case "command" | "command_reply" | "error" | "note" | "reasoning":
            return row.kind, row.content
        case "tool_call":
            # The round's own words and the calls' results stay out: the progress lines only.
            return "tool", "\n".join(progress_line(call) for call in row.tool_calls)
    raise UnknownMessageKind(f"the widget cannot show a {row.kind!r} row")


def progress_line(call: StoredToolCall) -> str:
    """The line the reply showed while the call ran."""
    return _done(call).progress_line


def tool_line(call: StoredToolCall) -> ToolLineView:
    """The same line for a client that draws its own mark beside the words."""
    return ToolLineView(call_id=call.id, name=call.name, status="done", label=_done(call).progress_words)


def _done(call: StoredToolCall) -> ToolStep:
    return ToolStep(call.id, call.name, "done", progress_summary(call))
