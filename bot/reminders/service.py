"""Reminders: schedule, list, cancel, set the time zone, and fire — one implementation for
the commands (which format it for people) and the tools (which return it as JSON).

Firing: the job system runs `fire` when a reminder's job falls due (the SQLite runner's
timer, or procrastinate's scheduled job). `fire` claims the occurrence with one
conditional UPDATE — only one run of the job, in one process, wins — then stores the
text in the conversation as a `reminder` row (idempotent: the row's key names the
reminder and occurrence), shows it on its lane, and records the outcome. A reminder
whose job ran late because Chorus was down is delivered marked late while younger than
`reminders.max_late_seconds`, and marked missed when older.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from bot import metrics
from bot.config import Settings
from bot.errors import ChorusError, DeliveryRefused
from bot.reminders.delivery import ReminderDelivery, ReminderLanes
from bot.reminders.times import BadTime, When, local_text, next_firing, zone_named
from bot.storage.boundary import boundary_for
from bot.storage.message_append import DuplicateMessage, NewMessage
from bot.storage.messages import MessageStore
from bot.storage.models import ChatSession, utcnow
from bot.storage.owners import Owner
from bot.storage.reminder_models import Reminder
from bot.storage.reminders import ACTIVE_STATES, NewReminder, ReminderStore, reminder_id_of
from bot.tools.base import ChatAddress
from persona import PersonaRegistry
from transcript.tokens import count_tokens

log = logging.getLogger(__name__)

# Delivered this long after its due time, a reminder is marked late (Chorus was down, or busy).
LATE_AFTER_SECONDS = 60.0
# The wait before the n-th retry of a delivery a platform refused without saying how long.
RETRY_BASE_SECONDS = 2.0
# What `/reminders` lists of reminders that did not reach anyone.
UNDELIVERED_STATES = ("missed", "failed")
REMINDER_PREFIX = "⏰ "


class ReminderError(ChorusError):
    """A reminder that cannot be set or found; the message says why."""


@dataclass(frozen=True)
class ReminderView:
    """A reminder as the tools return it and the commands format it."""

    id: int
    text: str
    due_at: str
    due_local: str
    recurrence: str | None
    state: str
    late: bool
    failure: str | None

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "text": self.text,
            "due_at": self.due_at,
            "due_local": self.due_local,
            "recurrence": self.recurrence,
            "state": self.state,
            "late": self.late,
            "failure": self.failure,
        }


@dataclass(frozen=True)
class Listing:
    waiting: list[ReminderView]
    undelivered: list[ReminderView]


class ReminderService:
    def __init__(
        self,
        store: ReminderStore,
        messages: MessageStore,
        personas: PersonaRegistry,
        settings: Settings,
        lanes: ReminderLanes,
        *,
        clock: Callable[[], datetime] = utcnow,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.store = store
        self.messages = messages
        self.personas = personas
        self.settings = settings
        self.lanes = lanes
        self.clock = clock
        self._sleep = sleep
        self.db = boundary_for(store.database)
        # Wakes the job queue after a reminder's job was written (set by the runtime).
        self.wake: Callable[[], None] = lambda: None

    # --- asking ------------------------------------------------------------------------

    async def zone(self, owner: Owner) -> ZoneInfo:
        """The owner's time zone: theirs from /timezone, else the `timezone` setting."""
        chosen: str | None = await self.db.run(self.store.zone_of, owner)
        return zone_named(chosen or self.settings.timezone)

    async def set_zone(self, owner: Owner, name: str) -> ZoneInfo:
        zone = zone_named(name)
        await self.db.run(self.store.set_zone, owner, zone.key)
        return zone

    async def schedule(
        self,
        session: ChatSession,
        persona_id: str,
        chat: ChatAddress | None,
        text: str,
        when: When,
        created_by: str | None = None,
    ) -> ReminderView:
        """Store a reminder for the chat `chat` (where it was asked), due `when`."""
        limits = self.settings.reminders
        text = text.strip()
        if chat is None:
            raise ReminderError("This conversation has no chat a reminder could be sent to.")
        if not text:
            raise ReminderError("A reminder needs a text: what should I remind you of?")
        if len(text) > limits.max_text_chars:
            raise ReminderError(
                f"A reminder's text may be {limits.max_text_chars:,} characters; this one has {len(text):,}."
            )
        if when.due_at <= self.clock():
            raise BadTime("That time is in the past.")
        owner = Owner.of(session)
        zone = await self.zone(owner)
        new = NewReminder(
            owner=owner,
            session_id=session.id,
            persona_id=persona_id,
            lane=chat.lane,
            chat_id=chat.chat_id,
            chat_kind=chat.chat_kind,
            thread_id=chat.thread_id,
            text=text,
            due_at=when.due_at,
            cron=when.cron,
            time_zone=zone.key,
            created_by=created_by,
        )
        stored = await self.db.run(self.store.add, new, limits.max_active)
        if stored is None:
            raise ReminderError(
                f"You already have {limits.max_active} reminders waiting; cancel one first (/reminders)."
            )
        metrics.REMINDERS.labels("scheduled").inc()
        self.wake()
        return view(stored)

    async def listing(self, owner: Owner) -> Listing:
        waiting = await self.db.run(self.store.listed, owner, ACTIVE_STATES)
        undelivered = await self.db.run(self.store.listed, owner, UNDELIVERED_STATES)
        return Listing([view(r) for r in waiting], [view(r) for r in undelivered])

    async def cancel(self, owner: Owner, reminder_id: int) -> bool:
        return bool(await self.db.run(self.store.cancel, owner, reminder_id))

    # --- firing --------------------------------------------------------------------------

    async def fire(self, job_key: str, occurrence: int) -> None:
        """The job of one occurrence fell due: deliver it, once, whichever run gets here first."""
        now = self.clock()
        run = uuid.uuid4().hex
        reminder = await self.db.run(self.store.claim, reminder_id_of(job_key), occurrence, run, now)
        if reminder is None:
            return  # cancelled, or this occurrence was already claimed by another run
        age = (now - reminder.due_at).total_seconds()
        next_due = (
            next_firing(reminder.cron, reminder.time_zone, max(now, reminder.due_at))
            if reminder.cron is not None
            else None
        )
        if age > self.settings.reminders.max_late_seconds:
            log.warning("reminder %s fell due %.0f s ago, while Chorus was down: missed", reminder.id, age)
            metrics.REMINDERS.labels("missed").inc()
            await self.db.run(self.store.finish, reminder, "missed", now, late=True, next_due=next_due)
            self.wake()
            return
        late = age > LATE_AFTER_SECONDS
        persona = self.personas.resolve(reminder.persona_id)
        text = delivered_text(reminder, late)
        await self.db.run(self._store_row, reminder, text, persona.name)
        address = ChatAddress(reminder.lane, reminder.chat_id, reminder.chat_kind, reminder.thread_id)
        assert reminder.id is not None
        delivery = ReminderDelivery(reminder.id, reminder.session_id, address, text, persona)
        try:
            message_id = await self._deliver(delivery)
        except DeliveryRefused as refused:
            log.warning("reminder %s could not be delivered on %s: %s", reminder.id, reminder.lane, refused)
            metrics.REMINDERS.labels("failed").inc()
            await self.db.run(
                self.store.finish, reminder, "failed", self.clock(), failure=str(refused), next_due=next_due
            )
        else:
            metrics.REMINDERS.labels("late" if late else "delivered").inc()
            await self.db.run(
                self.store.finish,
                reminder,
                "delivered",
                self.clock(),
                late=late,
                platform_message_id=message_id,
                next_due=next_due,
            )
        if next_due is not None:
            self.wake()

    def _store_row(self, reminder: Reminder, text: str, persona_name: str) -> None:
        """The reminder as the persona's message in its conversation, stored once per occurrence."""
        with suppress(DuplicateMessage):
            self.messages.append(
                reminder.session_id,
                NewMessage(
                    role="assistant",
                    kind="reminder",
                    content=text,
                    token_count=count_tokens(text),
                    persona_id=reminder.persona_id,
                    sender_name=persona_name,
                    lane=reminder.lane,
                    platform_chat_id=reminder.chat_id,
                    # The row's key: a second run of the same occurrence finds it stored.
                    platform_message_id=f"reminder-{reminder.id}-{reminder.occurrence}",
                ),
            )

    async def _deliver(self, delivery: ReminderDelivery) -> str | None:
        lane = self.lanes.get(delivery.address.lane)
        if lane is None:
            raise DeliveryRefused(
                f"the {delivery.address.lane} lane is not running in this process "
                "(the reminder is in the conversation's history)",
                permanent=True,
            )
        attempts = self.settings.reminders.delivery_attempts
        for attempt in range(1, attempts + 1):
            try:
                return await lane.deliver(delivery)
            except DeliveryRefused as refused:
                if refused.permanent or attempt == attempts:
                    raise
                wait = refused.retry_after if refused.retry_after is not None else RETRY_BASE_SECONDS**attempt
                log.info(
                    "reminder %s refused (%s): tried again in %.0f s", delivery.reminder_id, refused, wait
                )
                await self._sleep(wait)
        raise AssertionError("unreachable")


def delivered_text(reminder: Reminder, late: bool) -> str:
    text = f"{REMINDER_PREFIX}{reminder.text}"
    if late:
        due = local_text(reminder.due_at, ZoneInfo(reminder.time_zone))
        text += f"\n(late: this was due at {due}, while I was offline)"
    return text


def view(reminder: Reminder) -> ReminderView:
    assert reminder.id is not None
    zone = ZoneInfo(reminder.time_zone)
    return ReminderView(
        id=reminder.id,
        text=reminder.text,
        due_at=reminder.due_at.isoformat(),
        due_local=local_text(reminder.due_at, zone),
        recurrence=reminder.cron,
        state=reminder.state,
        late=reminder.late,
        failure=reminder.failure,
    )
