"""The chat API: visitor sessions, messages streamed as SSE, history, personas, files."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import (
    APIRouter,
    Depends,
    Header,
    HTTPException,
    Path,
    Query,
    Request,
    Response,
    Security,
    status,
)
from fastapi.responses import FileResponse, StreamingResponse
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from starlette.background import BackgroundTask

from bot.errors import SpeechError
from bot.visitors import WEB_LANE, visitor_message
from channels.web.clients import StreamSlot
from channels.web.errors import error_responses
from channels.web.events import turn_events
from channels.web.forms import CLIENT_ID, message_fields, message_form
from channels.web.history import message_views
from channels.web.lane import WebLane, lane_of, persona_view
from channels.web.pushes import pushed_events
from channels.web.schemas import (
    ApprovalAnswer,
    ApprovalResult,
    CommandResult,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    HistoryPage,
    PersonaView,
    ReminderEvent,
    SessionState,
    StartSession,
    StopResult,
    SwitchPersona,
    ThinkingEvent,
    ToolEvent,
)
from channels.web.speech import WIDGET_AUDIO
from channels.web.uploads import ACCEPTED_TYPES, MAX_FILES, check_request_size, read_uploads
from channels.web.visitors import COOKIE_NAME, Visitor

router = APIRouter(prefix="/api", tags=["chat"])

CurrentLane = Annotated[WebLane, Depends(lane_of)]
# Ids are database integers: anything larger cannot exist (and would overflow a query).
MAX_ID = 2**31 - 1
BEARER = HTTPBearer(auto_error=False, description="The visitor token from `POST /api/session`.")
COOKIE = APIKeyCookie(
    name=COOKIE_NAME, auto_error=False, description="The same token as an HttpOnly cookie (same-site pages)."
)
COOKIE_MAX_AGE = 365 * 24 * 3600
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# The stream's events, by name; their schemas go into the OpenAPI components (see app.py).
EVENT_MODELS: dict[str, type[BaseModel]] = {
    "delta": DeltaEvent,
    "thinking": ThinkingEvent,
    "tool": ToolEvent,
    "done": DoneEvent,
    "error": ErrorEvent,
    "reminder": ReminderEvent,
}
# A turn's stream, and a session's push stream (`GET /api/sessions/{id}/events`).
TURN_EVENT_NAMES = ("delta", "thinking", "tool", "done", "error")
PUSH_EVENT_NAMES = ("reminder",)


def sse_event(name: str) -> dict[str, Any]:
    """One Server-Sent Event as OpenAPI describes it: its name and a JSON `data` line."""
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"const": name},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"$ref": f"#/components/schemas/{EVENT_MODELS[name].__name__}"},
            },
        },
    }


MESSAGE_FORM_DOC: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "text": {"type": "string", "description": "The message, or a command like /link"},
                        "client_id": {
                            "type": "string",
                            "pattern": CLIENT_ID.pattern,
                            "description": "Idempotency id: a retried POST with the same id is stored once",
                        },
                        "files": {
                            "type": "array",
                            "maxItems": MAX_FILES,
                            "items": {"type": "string", "format": "binary"},
                            "description": f"Up to {MAX_FILES} images, documents or audio files "
                            f"({', '.join(ACCEPTED_TYPES)}); others get 415, oversized ones 413",
                        },
                        "voice": {
                            "type": "array",
                            "maxItems": MAX_FILES,
                            "items": {"type": "string", "format": "binary"},
                            "description": "A voice message recorded in the browser (WebM or OGG/Opus); "
                            "heard like a voice note, counted with `files`",
                        },
                    },
                }
            }
        },
    },
    "responses": {
        "200": {
            "description": "Server-Sent Events: `delta` events (a `thinking` event as the model starts "
            "thinking, a `tool` event as each tool call starts, reports progress and ends), then "
            "exactly one `done` or `error`; each event's `data` is one JSON object (DeltaEvent, "
            "ThinkingEvent, ToolEvent, DoneEvent, ErrorEvent).",
            "content": {
                "text/event-stream": {"schema": {"oneOf": [sse_event(name) for name in TURN_EVENT_NAMES]}}
            },
        }
    },
}
PUSH_STREAM_DOC: dict[str, Any] = {
    "responses": {
        "200": {
            "description": "Server-Sent Events, open until the client leaves: a `reminder` event "
            "(ReminderEvent) for each reminder stored in the conversation, its `id:` the message's seq; "
            "comments keep it alive. Reconnect with `Last-Event-ID` (or `?after=`) to get what was "
            "stored meanwhile.",
            "content": {
                "text/event-stream": {"schema": {"oneOf": [sse_event(name) for name in PUSH_EVENT_NAMES]}}
            },
        }
    },
}
FILE_CONTENT = {"*/*": {"schema": {"type": "string", "format": "binary"}}}


async def visitor_of(
    request: Request,
    lane: CurrentLane,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)],
    cookie: Annotated[str | None, Security(COOKIE)],
) -> Visitor:
    # The security parameters document the two ways to authenticate; `authenticate` reads them.
    return await lane.visitors.authenticate(request)


CurrentVisitor = Annotated[Visitor, Depends(visitor_of)]


@router.post("/session", response_model=SessionState, responses=error_responses(400, 403, 422, 429))
async def start_session(
    request: Request, response: Response, lane: CurrentLane, body: StartSession | None = None
) -> SessionState:
    """Resume the visitor of the token sent (bearer or cookie), or create a new anonymous one."""
    name = body.name if body is not None else None
    try:
        visitor = await lane.visitors.authenticate(request)
    except HTTPException as error:
        if error.status_code != status.HTTP_401_UNAUTHORIZED:
            raise
    else:
        if name is not None:
            visitor = await lane.visitors.visit(visitor.id, name)
        return await lane.state_of(visitor)
    lane.check_new_visitor(lane.clients.client_ip(request))
    await lane.sweep_if_due()
    token, visitor = await lane.visitors.create(name)
    response.set_cookie(
        COOKIE_NAME,
        token,
        max_age=COOKIE_MAX_AGE,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return await lane.state_of(visitor, token)


@router.get("/session", response_model=SessionState, responses=error_responses(401))
async def session_state(visitor: CurrentVisitor, lane: CurrentLane) -> SessionState:
    """The visitor's current conversation (it changes after /new or /link) and persona."""
    return await lane.state_of(visitor)


@router.get("/personas", response_model=list[PersonaView])
async def personas(lane: CurrentLane) -> list[PersonaView]:
    return [persona_view(persona) for persona in lane.engine.personas]


@router.get(
    "/sessions/{session_id}/messages",
    response_model=HistoryPage,
    responses=error_responses(401, 403, 404, 422),
)
async def history(
    session_id: str,
    visitor: CurrentVisitor,
    lane: CurrentLane,
    before: Annotated[
        int | None, Query(ge=1, le=MAX_ID, description="Only messages with a lower seq")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> HistoryPage:
    """A page of the conversation, oldest first; page back with `before=next_before`.

    Besides messages it holds events (role `system`, `event` set): commands, their answers,
    persona switches and errors, so a reload shows what the person saw.
    """
    session = await lane.visitors.owned_session(visitor, session_id)
    rows = await lane.history.page(session.id, before_seq=before, limit=limit)
    messages = message_views(rows, lane.engine.personas)
    more = len(rows) == limit and rows[0].seq > 1
    return HistoryPage(session_id=session.id, messages=messages, next_before=rows[0].seq if more else None)


@router.get(
    "/sessions/{session_id}/events",
    response_class=StreamingResponse,
    openapi_extra=PUSH_STREAM_DOC,
    responses=error_responses(401, 403, 404, 422),
)
async def session_events(
    session_id: str,
    request: Request,
    visitor: CurrentVisitor,
    lane: CurrentLane,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_ID, description="Send what was stored after this seq")
    ] = None,
    last_event_id: Annotated[
        str | None, Header(alias="Last-Event-ID", description="The last event's id (a seq), on reconnect")
    ] = None,
) -> Response:
    """Messages the conversation gets without the visitor asking (reminders), pushed as they are stored.

    Without `after` or `Last-Event-ID` the stream starts at the conversation's newest message.
    """
    session = await lane.visitors.owned_session(visitor, session_id)
    resumed = int(last_event_id) if last_event_id is not None and last_event_id.isdigit() else None
    start = after if after is not None else resumed
    if start is None:
        start = (await lane.visitors.service.refresh(session)).last_seq
    events = pushed_events(
        lane.history,
        lane.engine.personas,
        lane.pushes,
        session.id,
        start,
        request.is_disconnected,
        lane.runtime.settings.channels.web.push_stream_seconds,
    )
    return StreamingResponse(events, media_type="text/event-stream", headers=SSE_HEADERS)


@router.post(
    "/sessions/{session_id}/messages",
    response_class=StreamingResponse,
    openapi_extra=MESSAGE_FORM_DOC,
    responses=error_responses(400, 401, 403, 404, 409, 411, 413, 415, 422, 429),
)
async def post_message(
    session_id: str, request: Request, visitor: CurrentVisitor, lane: CurrentLane
) -> Response:
    """Send a message (text, a command, and/or files) and stream the reply as Server-Sent Events."""
    await lane.visitors.current_session(visitor, session_id)
    check_request_size(request, lane.attachments.largest_file)
    ip = lane.clients.client_ip(request)
    lane.check_rate(visitor, ip)
    async with message_form(request, max_files=MAX_FILES, max_fields=8) as form:
        fields = message_fields(form)
        attachments = await read_uploads(fields.files, lane.attachments)
        attachments += await read_uploads(fields.recordings, lane.attachments, recorded=True)
    inbound = visitor_message(
        visitor.id, visitor.name, text=fields.text or "", message_id=fields.client_id, attachments=attachments
    )
    slot = lane.streams.open(ip)
    return StreamingResponse(
        counted(turn_events(lane.engine, lane.history, inbound, visitor.route), slot),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
        # Also frees the slot when the stream never started (the client left at once).
        background=BackgroundTask(slot.aclose),
    )


@router.post(
    "/sessions/{session_id}/persona",
    response_model=CommandResult,
    responses=error_responses(400, 401, 403, 404, 409, 422, 429),
)
async def switch_persona(
    session_id: str, body: SwitchPersona, request: Request, visitor: CurrentVisitor, lane: CurrentLane
) -> CommandResult:
    """Switch the persona, exactly as `/persona <id>` does on every lane."""
    current = await lane.visitors.current_session(visitor, session_id)
    lane.check_rate(visitor, lane.clients.client_ip(request))
    command = f"/persona {body.persona_id.strip()}"
    reply = await lane.engine.respond(visitor_message(visitor.id, visitor.name, text=command))
    if reply.kind == "error":
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, reply.text)
    # /persona keeps the session; read it again for the persona it switched to.
    session = await lane.visitors.service.refresh(current)
    return CommandResult(
        kind=reply.kind, text=reply.text, session_id=session.id, persona=lane.persona_of(session)
    )


@router.post(
    "/sessions/{session_id}/stop",
    response_model=StopResult,
    responses=error_responses(401, 403, 404, 422),
)
async def stop_reply(session_id: str, visitor: CurrentVisitor, lane: CurrentLane) -> StopResult:
    """Stop the reply streaming in this conversation (the widget's Stop button, like `/stop`).

    What arrived is kept, stored as interrupted; its stream ends with `done` and status `stopped`.
    `stopped` is false when no reply was streaming in this server process.
    """
    session = await lane.visitors.owned_session(visitor, session_id)
    # A call waiting for the visitor's yes will not run, whichever process runs the turn.
    cancelled = await lane.engine.cancel_approvals(session.id)
    return StopResult(stopped=lane.engine.stop_turn(session.id) or cancelled > 0)


@router.post(
    "/sessions/{session_id}/approvals/{approval_id}",
    response_model=ApprovalResult,
    responses=error_responses(401, 403, 404, 422),
)
async def answer_approval(
    session_id: str,
    approval_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    body: ApprovalAnswer,
    visitor: CurrentVisitor,
    lane: CurrentLane,
) -> ApprovalResult:
    """Approve or deny a tool call that waits for it (the widget's Run and Deny buttons).

    It counts once: a second answer, or one after the call expired or its turn stopped,
    decides nothing (`decided` false) and says why.
    """
    session = await lane.visitors.owned_session(visitor, session_id)
    approval = await lane.engine.approvals.get(approval_id)
    if approval is None or approval.session_id != session.id:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "There is no such approval in this conversation.")
    decided = await lane.engine.approvals.decide(approval_id, body.approve, f"{WEB_LANE}:{visitor.id}")
    state = decided.approval.state if decided.approval is not None else approval.state
    return ApprovalResult(decided=decided.ok, state=state, text=decided.text)


@router.get(
    "/sessions/{session_id}/messages/{message_id}/speech/{part}",
    response_class=Response,
    responses={200: {"content": {"audio/mpeg": {}}}, **error_responses(401, 403, 404, 422, 502)},
)
async def reply_speech(
    session_id: str,
    message_id: Annotated[int, Path(ge=1, le=MAX_ID)],
    part: Annotated[int, Path(ge=0, le=1000)],
    visitor: CurrentVisitor,
    lane: CurrentLane,
) -> Response:
    """Part `part` of a reply, spoken (MP3): the paths come in the `done` event after `/voice on`."""
    session = await lane.visitors.owned_session(visitor, session_id)
    reply = await lane.history.reply_in(session.id, message_id)
    speaking = lane.engine.speaking
    texts = speaking.parts_of(reply.content, WIDGET_AUDIO) if reply is not None else []
    if part >= len(texts) or not speaking.available:
        # Without a speech service no reply is spoken (and /voice on says why).
        raise HTTPException(status.HTTP_404_NOT_FOUND, "There is no such spoken reply.")
    try:
        spoken = await speaking.speak_part(texts[part], part, WIDGET_AUDIO)
    except SpeechError as error:
        raise HTTPException(status.HTTP_502_BAD_GATEWAY, str(error)) from error
    return Response(
        spoken.audio, media_type=spoken.mime_type, headers={"Cache-Control": "private, max-age=3600"}
    )


@router.get(
    "/attachments/{attachment_id}",
    response_class=FileResponse,
    responses={200: {"content": FILE_CONTENT}, **error_responses(401, 403, 404, 422)},
)
async def attachment(
    attachment_id: Annotated[int, Path(ge=1, le=MAX_ID)], visitor: CurrentVisitor, lane: CurrentLane
) -> FileResponse:
    """A file from the visitor's own conversation; images inline, documents as downloads."""
    found = await lane.history.file(attachment_id)
    if found is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "There is no such attachment.")
    await lane.visitors.owned_session(visitor, found.session_id)
    path = lane.attachments.path_of(found.path)
    if not path.is_file():
        raise HTTPException(status.HTTP_404_NOT_FOUND, "The file of this attachment is no longer stored.")
    return FileResponse(
        path,
        media_type=found.mime_type,
        filename=found.filename,
        content_disposition_type="inline" if found.kind == "image" else "attachment",
        # Never let a browser run an uploaded file as a page.
        headers={"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"},
    )


async def counted(events: AsyncIterator[bytes], slot: StreamSlot) -> AsyncIterator[bytes]:
    """The stream, holding one of the client's stream slots until it ends."""
    try:
        async for event in events:
            yield event
    finally:
        slot.close()
