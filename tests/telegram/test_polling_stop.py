"""Stopping the poller ends it even when the stop meets a stored message in one loop step."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from aiogram.methods import GetUpdates
from aiogram.types import Chat, Message, Update

from channels.telegram.polling import UpdatePoller

DEADLINE = 60.0


class RedeliveringBot:
    """Answers every getUpdates with the one update, as Telegram does until an offset confirms it."""

    def __init__(self, update: Update) -> None:
        self.update = update
        self.calls = 0
        self.polled_again = asyncio.Event()

    async def __call__(self, method: GetUpdates, request_timeout: int | None = None) -> list[Update]:
        self.calls += 1
        if self.calls > 1:
            self.polled_again.set()
        await asyncio.sleep(0)
        return [self.update] if method.offset is None or method.offset <= self.update.update_id else []


class SlowDispatcher:
    """Holds each update until released, like a turn still storing its message."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def feed_update(self, bot: Any, update: Update) -> None:
        await self.release.wait()


async def test_stop_right_after_a_message_is_stored_ends_the_poller() -> None:
    message = Message(message_id=7, date=datetime.now(UTC), chat=Chat(id=1, type="private"), text="hi")
    bot = RedeliveringBot(Update(update_id=100, message=message))
    dispatcher = SlowDispatcher()
    poller = UpdatePoller(bot, dispatcher, ["message"])  # type: ignore[arg-type]
    poller.start()
    async with asyncio.timeout(DEADLINE):
        await bot.polled_again.wait()
    # A few loop steps: the poller sees only the update it already took and waits for it
    # to reach the database.
    for _ in range(10):
        await asyncio.sleep(0)

    # The message is stored and the lane stops in the same step of the event loop.
    poller.stored([message])
    async with asyncio.timeout(DEADLINE):
        await poller.stop()
    assert poller.confirmed_offset == 101

    dispatcher.release.set()
    async with asyncio.timeout(DEADLINE):
        await poller.wait_handlers(DEADLINE)
