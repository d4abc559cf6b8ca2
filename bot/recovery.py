"""Finishing the turns of a process that died: answered, or the person told, never twice.

At start (and, with several processes on PostgreSQL, every `scan_seconds`) a
process looks for turns younger than `recovery.max_age_seconds` whose owner is
dead (see `bot.liveness`): a user message with no reply, or a reply whose draft
on the platform was left unfinished. It claims each with one conditional UPDATE
— whichever process's UPDATE matches first owns the turn — then, per
`recovery.mode`, answers it on its lane or tells the person it went unanswered;
a left-over draft becomes the final text.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import Protocol, runtime_checkable

from bot.liveness import Liveness
from bot.storage.delivery_models import Delivery
from bot.storage.models import utcnow
from bot.turns.engine import TurnEngine
from bot.turns.events import Reply, TurnEvent
from bot.turns.plan import assistant_reply, with_note
from bot.turns.recorder import SHUTDOWN_NOTE

# A lane's `resume` gets the turn's `Delivery`; lanes name the type from here.
__all__ = ["PARALLEL_TURNS", "UNANSWERED_NOTICE", "Delivery", "Recovery", "ResumableLane"]

log = logging.getLogger(__name__)

UNANSWERED_NOTICE = "Sorry, the server restarted before this message was answered. Please send it again."
# Recovered turns answered at once; the rest wait their turn.
PARALLEL_TURNS = 8


@runtime_checkable
class ResumableLane(Protocol):
    async def resume(self, delivery: Delivery, events: AsyncGenerator[TurnEvent, None]) -> None:
        """Deliver `events` for a turn this process did not take, over its old draft if any."""
        ...


class Recovery:
    def __init__(self, engine: TurnEngine, liveness: Liveness, lanes: dict[str, ResumableLane]) -> None:
        self.engine = engine
        self.liveness = liveness
        self.lanes = lanes
        self.settings = engine.settings.recovery
        self._slots = asyncio.Semaphore(PARALLEL_TURNS)
        self._running: set[asyncio.Task[None]] = set()

    def claim(self) -> list[Delivery]:
        """Take over every turn of a dead process that this process's lanes can finish.

        Synchronous on purpose: called before lanes take messages, so a platform
        re-sending one of these messages finds it already claimed.
        """
        if self.settings.mode == "off":
            return []
        since = utcnow() - timedelta(seconds=self.settings.max_age_seconds)
        deliveries = self.engine.deliveries
        dead: dict[str | None, bool] = {}
        claimed: list[Delivery] = []
        for delivery in deliveries.unfinished(since, self.lanes, self.engine.instance_id):
            if delivery.owner not in dead:
                dead[delivery.owner] = self.liveness.is_dead(delivery.owner)
            if dead[delivery.owner] and deliveries.claim(delivery, self.engine.instance_id):
                claimed.append(delivery)
                self.engine.recovering.add(delivery.user_message_id)
        return claimed

    def finish_all(self, claimed: list[Delivery]) -> None:
        """Answer (or repair, or notify) the claimed turns in the background."""
        for delivery in claimed:
            task = asyncio.create_task(self._finish(delivery), name=f"recover-{delivery.user_message_id}")
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def run(self, claimed: list[Delivery]) -> None:
        """Finish what was claimed at start; on a shared database keep looking while running."""
        while True:
            if claimed:
                log.info("recovering %d turns left by a stopped process", len(claimed))
            self.finish_all(claimed)
            if not self.liveness.shared:
                return
            await asyncio.sleep(self.settings.scan_seconds)
            claimed = await self.engine.db.run(self.claim)

    async def wait(self, timeout: float) -> None:
        """Wait up to `timeout` for recovered turns still being delivered."""
        if self._running:
            await asyncio.wait(list(self._running), timeout=timeout)

    async def _finish(self, delivery: Delivery) -> None:
        lane = self.lanes[delivery.lane]
        deliveries = self.engine.deliveries
        try:
            async with self._slots:
                if delivery.state == "replied":
                    stored = await self.engine.db.run(self._stored_reply, delivery)
                    await lane.resume(delivery, _single(stored))
                    await self.engine.db.run(deliveries.finish, delivery.user_message_id, "delivered")
                    outcome = "its draft finished"
                elif self.settings.mode == "answer":
                    await lane.resume(delivery, self.engine.resume(delivery))
                    await self.engine.db.run(deliveries.finish, delivery.user_message_id, "recovered")
                    outcome = "answered"
                else:
                    await lane.resume(delivery, _single(Reply(kind="error", text=UNANSWERED_NOTICE)))
                    await self.engine.db.run(deliveries.finish, delivery.user_message_id, "noticed")
                    outcome = "the person told"
            log.info("recovered message %d on %s: %s", delivery.user_message_id, delivery.lane, outcome)
        except Exception:
            log.exception("could not recover message %d on %s", delivery.user_message_id, delivery.lane)
        finally:
            self.engine.recovering.discard(delivery.user_message_id)

    def _stored_reply(self, delivery: Delivery) -> Reply:
        stored = self.engine.stores.messages.reply_to(delivery.user_message_id)
        if stored is None:
            return Reply(kind="error", text=UNANSWERED_NOTICE)
        text = with_note(stored.content, SHUTDOWN_NOTE) if stored.status == "interrupted" else stored.content
        persona = self.engine.personas.resolve(stored.persona_id)
        return assistant_reply(text, persona, delivery.session_id, status=stored.status)


async def _single(reply: Reply) -> AsyncGenerator[TurnEvent, None]:
    yield reply
