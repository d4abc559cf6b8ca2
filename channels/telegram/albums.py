"""Albums: Telegram delivers each photo of a media group as its own message."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiogram.types import Message

log = logging.getLogger(__name__)

AlbumHandler = Callable[[list[Message]], Awaitable[None]]


class AlbumCollector:
    """Gathers the messages of one media group, then hands them on together.

    Each new item restarts a short wait; when no item has arrived for `delay`
    seconds the album is complete. Telegram sends no "last item" marker.
    """

    def __init__(self, on_album: AlbumHandler, delay: float) -> None:
        self._on_album = on_album
        self._delay = delay
        self._items: dict[tuple[int, str], list[Message]] = {}
        self._timers: dict[tuple[int, str], asyncio.Task[None]] = {}

    def add(self, message: Message) -> None:
        if message.media_group_id is None:
            raise ValueError("only messages of an album are collected")
        key = (message.chat.id, message.media_group_id)
        self._items.setdefault(key, []).append(message)
        waiting = self._timers.get(key)
        if waiting is not None:
            waiting.cancel()
        self._timers[key] = asyncio.create_task(self._complete_later(key))

    async def close(self) -> None:
        """Stop waiting; albums still incomplete are dropped (shutdown)."""
        timers = list(self._timers.values())
        for timer in timers:
            timer.cancel()
        await asyncio.gather(*timers, return_exceptions=True)

    async def _complete_later(self, key: tuple[int, str]) -> None:
        await asyncio.sleep(self._delay)
        # Leave the tables before handing on, so a late item starts a new album
        # instead of cancelling the turn that is now running.
        del self._timers[key]
        album = sorted(self._items.pop(key), key=lambda message: message.message_id)
        try:
            await self._on_album(album)
        except Exception:
            log.exception("album %s in chat %s failed", key[1], key[0])
