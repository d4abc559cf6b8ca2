"""A turn as Server-Sent Events: `delta` pieces, `thinking` and `tool` steps, then one `done` or `error`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from bot.history import ConversationHistory, StoredEntry
from bot.turns.engine import TurnEngine
from bot.turns.events import Delta, Reply, Thinking, ToolStep, TurnEvent
from bot.turns.inbound import InboundMessage
from bot.turns.routing import Route
from channels.web.speech import speech_paths

log = logging.getLogger(__name__)

COALESCE_SECONDS = 0.05
SERVER_FAILURE = "Something went wrong on the server while answering. Your message may be saved; try again."


def encode_event(event: str, data: dict[str, Any]) -> bytes:
    # JSON keeps newlines in the text from ending the event early.
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


class Pieces:
    """What the turn has streamed and the SSE side has not sent yet."""

    def __init__(self) -> None:
        self.text: list[str] = []
        # Tool steps and the model starting to think, each after the text that came before it.
        self.steps: list[tuple[str, ToolStep | Thinking]] = []
        self.final: Reply | None = None
        self.failed = False
        self.changed = asyncio.Event()

    def take_text(self) -> str:
        text = "".join(self.text)
        self.text.clear()
        return text


async def run_turn(events: AsyncGenerator[TurnEvent, None], pieces: Pieces, who: str) -> None:
    """Read the turn into `pieces` (a task of its own, so sending can pace itself)."""
    try:
        async with contextlib.aclosing(events) as turn:
            async for event in turn:
                if isinstance(event, Delta):
                    pieces.text.append(event.text)
                elif isinstance(event, ToolStep | Thinking):
                    pieces.steps.append((pieces.take_text(), event))
                else:
                    pieces.final = event
                pieces.changed.set()
    except Exception:
        log.exception("web turn failed for visitor %s", who)
        pieces.failed = True
    finally:
        pieces.changed.set()


async def turn_events(
    engine: TurnEngine, history: ConversationHistory, inbound: InboundMessage, route: Route | None = None
) -> AsyncIterator[bytes]:
    """Stream one turn; a retried message that was already answered gets the stored answer.

    Text is sent as it comes, but at most one `delta` event per COALESCE_SECONDS: a model
    streams a token at a time, and an event (JSON, an ASGI send and a socket write) per
    token was most of the server's work per turn. The first piece goes at once, and text
    never waits longer than COALESCE_SECONDS, even when the model pauses. Each send is
    one chunk of all the events that are ready.
    """
    pieces = Pieces()
    turn = asyncio.create_task(run_turn(engine.stream(inbound, route), pieces, inbound.actor.user_id))
    sent_at = -COALESCE_SECONDS
    try:
        while True:
            await pieces.changed.wait()
            pieces.changed.clear()
            pause = sent_at + COALESCE_SECONDS - time.monotonic()
            if pause > 0 and pieces.final is None and not pieces.failed:
                await asyncio.sleep(pause)
            # What arrived since the last send goes as one chunk: one ASGI send and one socket
            # write however many events it holds (a tool round adds two).
            chunk: list[bytes] = []
            for before, step in pieces.steps:
                if before:
                    chunk.append(encode_event("delta", {"text": before}))
                if isinstance(step, Thinking):
                    chunk.append(encode_event("thinking", {}))
                else:
                    chunk.append(encode_event("tool", tool_payload(step)))
            pieces.steps.clear()
            text = pieces.take_text()
            if text:
                chunk.append(encode_event("delta", {"text": text}))
                sent_at = time.monotonic()
            if pieces.failed:
                failure = {"kind": "error", "text": SERVER_FAILURE, "status": "failed"}
                chunk.append(encode_event("error", failure))
            elif pieces.final is not None:
                name, data = await final_event(history, pieces.final)
                speech = speech_paths(pieces.final, engine.speaking)
                chunk.append(encode_event(name, data | {"speech": speech}))
            if chunk:
                yield b"".join(chunk)
            if pieces.failed or pieces.final is not None:
                return
    finally:
        if not turn.done():
            # The client went away: end the turn now, so what arrived is stored as interrupted.
            turn.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await turn


async def final_event(history: ConversationHistory, reply: Reply) -> tuple[str, dict[str, Any]]:
    if reply.kind == "error":
        return "error", final_payload(reply)
    if reply.kind == "duplicate":
        answer = await history.answer_to(reply.user_message_id) if reply.user_message_id else None
        return "done", duplicate_payload(answer, reply)
    return "done", final_payload(reply)


def tool_payload(step: ToolStep) -> dict[str, Any]:
    """A tool call starting, reporting progress or ending: its name and a short summary, never its result."""
    return {
        "call_id": step.call_id,
        "name": step.name,
        "status": step.status,
        "summary": step.summary,
        "progress": step.progress or None,
        "line": step.progress_line,
        "label": step.progress_words,
        "approval_id": step.approval_id,
    }


def final_payload(reply: Reply) -> dict[str, Any]:
    return {
        "kind": reply.kind,
        "text": reply.text,
        "status": reply.status,
        "message_id": reply.message_id,
        "user_message_id": reply.user_message_id,
        "session_id": reply.session_id,
        "persona_id": reply.persona_id,
        "persona_name": reply.persona_name,
        "reasoning": reply.reasoning,
    }


def duplicate_payload(answer: StoredEntry | None, reply: Reply) -> dict[str, Any]:
    """The stored answer of a message sent again, or the duplicate reply itself when none is stored."""
    if answer is None:
        return final_payload(reply)
    return final_payload(
        Reply(
            kind="assistant",
            text=answer.content,
            session_id=reply.session_id,
            message_id=answer.id,
            user_message_id=reply.user_message_id,
            persona_id=answer.persona_id,
            persona_name=answer.sender_name,
            status=answer.status,
        )
    )
