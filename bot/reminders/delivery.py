"""How a fired reminder reaches the chat it was asked in: one small protocol each lane implements.

A lane's runner registers a `ReminderLane` under its name with the runtime's
`ReminderLanes`; the reminder service hands it each reminder of that lane as it falls
due. The reminder's text is already stored in the conversation when `deliver` is called
(the history and later turns see it on every lane); `deliver` only shows it on the
platform and returns the platform's message id. A platform that refuses raises
`DeliveryRefused`: with `retry_after` it is tried again after that wait, `permanent`
(a blocked bot, a deleted chat) is not tried again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bot.tools.base import ChatAddress
from persona import Persona


@dataclass(frozen=True)
class ReminderDelivery:
    """One fired reminder: where it goes, what it says, which persona says it."""

    reminder_id: int
    session_id: str
    address: ChatAddress
    text: str
    persona: Persona


class ReminderLane(Protocol):
    async def deliver(self, delivery: ReminderDelivery) -> str | None:
        """Show the reminder on the platform; the platform's message id (None where it has none)."""
        ...


class ReminderLanes:
    """The lanes running in this process that can show a reminder, by lane name."""

    def __init__(self) -> None:
        self._lanes: dict[str, ReminderLane] = {}

    def register(self, lane: str, deliverer: ReminderLane) -> None:
        self._lanes[lane] = deliverer

    def unregister(self, lane: str, deliverer: ReminderLane) -> None:
        if self._lanes.get(lane) is deliverer:
            del self._lanes[lane]

    def get(self, lane: str) -> ReminderLane | None:
        return self._lanes.get(lane)

    def names(self) -> tuple[str, ...]:
        return tuple(self._lanes)
