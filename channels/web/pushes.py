"""Messages a conversation gets without a person asking (reminders), pushed to its open widgets.

`GET /api/sessions/{id}/events` is a long-lived Server-Sent Events stream. A reminder
is stored in the conversation before it is delivered, so the stream sends stored rows
after the last seq the client saw: a delivery in this process wakes it at once
(`SessionPushes.notify`, which the web lane's `ReminderLane` calls), one in another
process is found at the next look (`PUSH_POLL_SECONDS`), and a client that reconnects
with the last event id it got misses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

from bot.history import ConversationHistory
from bot.reminders.delivery import ReminderDelivery
from channels.web.events import encode_event
from channels.web.history import message_view
from channels.web.schemas import ReminderEvent
from persona import PersonaRegistry

# How often an open stream looks for rows another process stored.
PUSH_POLL_SECONDS = 2.0
# A comment this often keeps proxies from closing an idle stream.
KEEPALIVE_SECONDS = 15.0
# Tells the browser how long to wait before it reconnects a dropped stream.
RETRY_MILLISECONDS = 2000


class SessionPushes:
    """Wakes the open streams of a session in this process."""

    def __init__(self) -> None:
        self._listeners: dict[str, set[asyncio.Event]] = defaultdict(set)
        self.closed = False

    def close(self) -> None:
        """Shutting down: every open stream ends, and the browsers reconnect to a running process."""
        self.closed = True
        for listeners in self._listeners.values():
            for listener in listeners:
                listener.set()

    def notify(self, session_id: str) -> None:
        for listener in self._listeners.get(session_id, ()):
            listener.set()

    @contextlib.contextmanager
    def listen(self, session_id: str) -> Iterator[asyncio.Event]:
        listener = asyncio.Event()
        self._listeners[session_id].add(listener)
        try:
            yield listener
        finally:
            self._listeners[session_id].discard(listener)
            if not self._listeners[session_id]:
                del self._listeners[session_id]


class WebReminders:
    """The web lane's `ReminderLane`: the reminder is stored already; open widgets are woken."""

    def __init__(self, pushes: SessionPushes) -> None:
        self.pushes = pushes

    async def deliver(self, delivery: ReminderDelivery) -> str | None:
        self.pushes.notify(delivery.session_id)
        return None


async def pushed_events(
    history: ConversationHistory,
    personas: PersonaRegistry,
    pushes: SessionPushes,
    session_id: str,
    after_seq: int,
    disconnected: Callable[[], Awaitable[bool]],
    lifetime: float,
) -> AsyncIterator[bytes]:
    """The stream: each pushed row after `after_seq` as it is stored, until the client leaves
    or `lifetime` seconds passed (the client reconnects from the last id it got)."""
    yield f"retry: {RETRY_MILLISECONDS}\n\n".encode()
    loop = asyncio.get_running_loop()
    quiet_since = loop.time()
    ends = quiet_since + lifetime
    with pushes.listen(session_id) as woken:
        while not pushes.closed and loop.time() < ends and not await disconnected():
            woken.clear()
            for row in await history.pushed_after(session_id, after_seq):
                after_seq = row.seq
                event = ReminderEvent(message=message_view(row, personas))
                yield f"id: {row.seq}\n".encode() + encode_event("reminder", event.model_dump())
                quiet_since = loop.time()
            if loop.time() - quiet_since >= KEEPALIVE_SECONDS:
                yield b": keepalive\n\n"
                quiet_since = loop.time()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(min(PUSH_POLL_SECONDS, ends - loop.time()), 0)):
                    await woken.wait()
