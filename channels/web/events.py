"""A turn as Server-Sent Events: `delta` pieces, then one `done` or `error`."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from bot.storage.store import Store
from bot.turns.engine import Engine
from bot.turns.events import Delta, Reply
from bot.turns.inbound import InboundMessage

log = logging.getLogger(__name__)

SERVER_FAILURE = "Something went wrong on the server while answering. Your message may be saved; try again."


def encode_event(event: str, data: dict[str, Any]) -> bytes:
    # JSON keeps newlines in the text from ending the event early.
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def turn_events(engine: Engine, store: Store, inbound: InboundMessage) -> AsyncIterator[bytes]:
    """Stream one turn; a retried message that was already answered gets the stored answer."""
    try:
        async for event in engine.stream(inbound):
            if isinstance(event, Delta):
                yield encode_event("delta", {"text": event.text})
            elif event.kind == "error":
                yield encode_event("error", final_payload(event))
            elif event.kind == "duplicate":
                yield encode_event("done", duplicate_payload(store, event))
            else:
                yield encode_event("done", final_payload(event))
    except Exception:
        log.exception("web turn failed for visitor %s", inbound.actor.user_id)
        yield encode_event("error", {"kind": "error", "text": SERVER_FAILURE, "status": "failed"})


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
    }


def duplicate_payload(store: Store, reply: Reply) -> dict[str, Any]:
    answer = store.reply_to(reply.user_message_id) if reply.user_message_id else None
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
