"""Turn containment: whatever a turn raises that Chorus did not foresee ends that turn, never the lane.

The engine's `stream` runs every turn through `contain`. A `ChorusError` is foreseen
and answered where it happens; anything else (a `TypeError` from a provider's client, a
tool, speech or storage) is logged once with its traceback here, the turn's delivery is
marked failed, and the person gets `FAILED_MESSAGE` as the turn's one `Reply`. Their
message stays stored. Lanes rely on that: a turn's stream always ends with a `Reply`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing

from bot.logs import session_id_var
from bot.storage.boundary import DatabaseBoundary
from bot.storage.deliveries import DeliveryStore
from bot.storage.message_append import NewMessage, ingest_key
from bot.storage.messages import MessageStore
from bot.turns.events import Reply, TurnEvent
from bot.turns.inbound import InboundMessage

log = logging.getLogger(__name__)

FAILED_MESSAGE = (
    "Something went wrong on our side while answering ({kind}). "
    "Your message is saved, and the error is in the log for whoever runs this bot."
)


class TurnContainment:
    """Ends a turn that raised with a reply, a failed delivery and one logged traceback."""

    def __init__(self, db: DatabaseBoundary, messages: MessageStore, deliveries: DeliveryStore) -> None:
        self.db = db
        self.messages = messages
        self.deliveries = deliveries

    async def contain(
        self, inbound: InboundMessage, events: AsyncGenerator[TurnEvent, None]
    ) -> AsyncGenerator[TurnEvent, None]:
        replied = False
        try:
            # aclosing: a lane that stops listening closes the turn inside at once.
            async with aclosing(events) as turn:
                async for event in turn:
                    replied = replied or isinstance(event, Reply)
                    yield event
        except Exception as error:
            log.exception("a %s turn failed unexpectedly (%s)", inbound.lane, type(error).__name__)
            if not replied:
                yield await self._failed(inbound, error)

    async def _failed(self, inbound: InboundMessage, error: Exception) -> Reply:
        session_id = session_id_var.get()
        key = ingest_key(inbound.lane, inbound.chat_id, inbound.platform_message_id)
        try:
            if key is not None:
                await self.db.run(self.deliveries.fail, key)
            if session_id is not None:
                # An event row, as a provider's refusal leaves: the transcript shows the turn failed.
                event = NewMessage(
                    role="system", kind="error", content=f"failed: {type(error).__name__}", token_count=0
                )
                await self.db.run(self.messages.append, session_id, event)
        except Exception:
            # Storage itself may be what failed: the person is told all the same.
            log.warning("could not record the failed turn", exc_info=True)
        return Reply(
            kind="error", text=FAILED_MESSAGE.format(kind=type(error).__name__), session_id=session_id
        )
