"""The JSON shapes of the web API (they also document it at /docs)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class StartSession(BaseModel):
    name: str | None = Field(default=None, description="How the visitor wants to be called.")


class PersonaView(BaseModel):
    id: str
    name: str
    greeting: str | None = None


class UploadLimits(BaseModel):
    max_file_bytes: int
    # Voice messages and audio files have limits of their own.
    max_audio_bytes: int
    max_audio_seconds: float
    max_files: int
    accepted_types: list[str]
    max_message_chars: int


class SessionState(BaseModel):
    visitor_id: str
    name: str
    session_id: str
    persona: PersonaView
    personas: list[PersonaView]
    limits: UploadLimits
    token: str | None = Field(
        default=None, description="The visitor's bearer token; returned only when the visitor is created."
    )


class AttachmentView(BaseModel):
    id: int
    kind: str
    filename: str
    mime_type: str
    size: int
    url: str


class ToolLineView(BaseModel):
    """One call of a reply's tool round, as its line showed it while the reply streamed."""

    call_id: str
    name: str = Field(description="The tool, such as `recall`.")
    status: Literal["done"] = Field(description="A stored call is shown as done.")
    label: str = Field(description='The line without its mark, such as "recall: dentist".')


class MessageView(BaseModel):
    id: int
    seq: int
    role: str = Field(description="`user`, `assistant`, or `system` for an event.")
    event: str | None = Field(
        default=None,
        description="For events only: `command`, `command_reply`, `persona_switch`, `error`, `note`, "
        "or `tool` (the progress lines of a reply's tool calls, never their results); `reminder` for "
        "an assistant message that was a reminder falling due.",
    )
    text: str
    status: str
    persona_id: str | None = None
    persona_name: str | None = None
    sender_name: str | None = None
    lane: str | None = None
    created_at: str
    attachments: list[AttachmentView] = Field(default_factory=list)
    tools: list[ToolLineView] = Field(
        default_factory=list, description="For `tool` events: each call's line, in the order they started."
    )


class HistoryPage(BaseModel):
    session_id: str
    messages: list[MessageView]
    next_before: int | None = Field(
        default=None, description="Pass as `before` to get the page of older messages; null at the start."
    )


class SwitchPersona(BaseModel):
    persona_id: str


class CommandResult(BaseModel):
    kind: str
    text: str
    session_id: str | None
    persona: PersonaView


class LaneHealthView(BaseModel):
    # "down": its connection failed and it reconnects by itself (`reason` says when);
    # "failed": stopped until the operator fixes `reason` (HTTP 503).
    state: Literal["starting", "running", "down", "failed"]
    reason: str | None = None
    since: datetime


class McpServerHealthView(BaseModel):
    """An MCP server: while it is down its tools answer so, and turns go on without them."""

    state: Literal["starting", "ready", "down", "stopped"]
    transport: Literal["stdio", "http", "sse"]
    tools: list[str] = Field(description="The names its tools are offered under.")
    last_error: str | None = Field(default=None, description="Why it is down (secrets masked).")
    restarts: int
    retry_in_seconds: float | None = Field(default=None, description="When a down server is tried again.")
    since: datetime


class Health(BaseModel):
    # "ok", or "failed" (HTTP 503) when a lane has stopped for good; `lanes` says which and why.
    # A down MCP server does not fail the process: turns go on, its tools answer that it is down.
    status: str
    model: str
    lanes: dict[str, LaneHealthView] = Field(default_factory=dict)
    mcp_servers: dict[str, McpServerHealthView] = Field(default_factory=dict)


class FieldProblem(BaseModel):
    location: list[str] = Field(description='Where the problem is, e.g. ["query", "limit"].')
    message: str


class ErrorBody(BaseModel):
    """Every error the API answers with has this shape."""

    detail: str = Field(description="What went wrong, in words a person can act on.")
    errors: list[FieldProblem] | None = Field(
        default=None, description="For invalid requests (422): each field that failed validation."
    )


class StopResult(BaseModel):
    stopped: bool = Field(description="True when a reply was streaming and has been asked to stop.")


class ApprovalAnswer(BaseModel):
    """The visitor's yes or no to a tool call that waits for it (a `tool` event with status `asked`)."""

    approve: bool = Field(description="True runs the call; false denies it (the call never runs).")


class ApprovalResult(BaseModel):
    decided: bool = Field(description="False when it was decided already, expired or cancelled.")
    state: str = Field(description="`pending`, `approved`, `denied`, `expired` or `cancelled`.")
    text: str = Field(description="What to show the visitor, such as `Approved.` or `Already denied.`")


class DeltaEvent(BaseModel):
    """`event: delta`: the next piece of the reply's text."""

    text: str


class ThinkingEvent(BaseModel):
    """`event: thinking`: the model started thinking; show "💭 thinking…" until text or a tool
    event follows. What it thinks comes in `done.reasoning` after `/reasoning on`."""


class ToolEvent(BaseModel):
    """`event: tool`: a tool call of the turn started, reported progress, or ended (its result
    is never sent).

    The reply's text streamed before a call's `started` event belonged to that tool round;
    the answer's text streams anew after the last `tool` event.
    """

    call_id: str = Field(
        description="Pairs a call's `started` event with its `progress` events and its `done` or `error`."
    )
    name: str = Field(description="The tool, such as `recall`.")
    status: Literal["started", "progress", "asked", "done", "error", "denied"] = Field(
        description="`asked`: the call waits for the visitor's yes or no (answer it at "
        "`POST /api/sessions/{id}/approvals/{approval_id}`); `denied`: it was refused, expired or "
        "cancelled, and did not run."
    )
    summary: str = Field(description="The call's main argument, shortened.")
    progress: str | None = Field(
        default=None,
        description="For `progress` events: how far the call is by its tool's own report, as `2/4` "
        "or the tool's words (an MCP server's progress notifications).",
    )
    line: str = Field(
        description='The progress line people are shown, such as "🔧 recall: dentist" or '
        '"🔧 files__copy: report.pdf · 2/4".'
    )
    label: str = Field(
        description='The line without its leading mark ("recall: dentist"), for a client that '
        "draws its own mark of the call's status, as the widget does."
    )
    approval_id: int | None = Field(default=None, description="For `asked` events: the question to answer.")


class DoneEvent(BaseModel):
    """`event: done`: the turn ended; `text` is the whole stored reply (or the command's answer)."""

    kind: str = Field(description="`assistant`, `command`, or `duplicate` answered from storage.")
    text: str
    status: str = Field(description="`complete`, `interrupted` (cut off) or `stopped` (by the visitor).")
    message_id: int | None = None
    user_message_id: int | None = None
    session_id: str | None = None
    persona_id: str | None = None
    persona_name: str | None = None
    reasoning: str | None = Field(
        default=None,
        description="After `/reasoning on`: what the model thought this turn (never part of `text`).",
    )
    speech: list[str] = Field(
        default_factory=list,
        description="After `/voice on`: the reply spoken, as paths of its audio parts (MP3), in order.",
    )


class ReminderEvent(BaseModel):
    """`event: reminder` on `GET /api/sessions/{id}/events`: a reminder fell due and was stored.

    The event's `id:` line is the message's `seq`: a client that reconnects sends it
    back (`Last-Event-ID`, or `?after=`) and misses nothing stored meanwhile.
    """

    message: MessageView


class ErrorEvent(BaseModel):
    """`event: error`: the turn failed after the stream began; the message is saved."""

    kind: str
    text: str
    status: str | None = None
    message_id: int | None = None
    user_message_id: int | None = None
    session_id: str | None = None
    persona_id: str | None = None
    persona_name: str | None = None
