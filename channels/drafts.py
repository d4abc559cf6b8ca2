"""Streaming a reply into one platform message by throttled edits."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Generic, TypeVar

from channels.text import split_message

Handle = TypeVar("Handle")
CURSOR = " ▌"

log = logging.getLogger(__name__)


class DraftGone(Exception):
    """Raised by a lane's `edit` when the draft message no longer exists or can't be edited."""


class DraftStream(Generic[Handle]):
    """Shows a reply while it streams, then delivers the final text in parts.

    The first update sends a draft message (after `first_after` seconds of streaming,
    so a reply that finishes sooner is sent once, without edits); later updates edit it
    at most once per `interval` seconds (platforms rate-limit edits). `finish` edits the
    draft into the first part of the final text and sends any further parts. When the
    draft is gone (deleted by someone, no longer editable), the next preview starts a
    new draft and the final text is sent as a new message: no reply is lost.
    """

    def __init__(
        self,
        *,
        send: Callable[[str], Awaitable[Handle]],
        edit: Callable[[Handle, str], Awaitable[None]],
        limit: int,
        interval: float = 1.0,
        first_after: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        draft: Handle | None = None,
    ) -> None:
        self._send = send
        self._edit = edit
        self._limit = limit
        self._interval = interval
        self._first_after = first_after
        self._clock = clock
        # A draft message an earlier process left (a recovered turn) is edited, not replaced.
        self._draft: Handle | None = draft
        self._shown = ""
        self._started: float | None = None
        self._last_edit = float("-inf")
        self._finishing = False
        # A progress line the interval held back, and the task that shows it when it may.
        self._pending: str | None = None
        self._later: asyncio.Task[None] | None = None
        self._waiting = False

    @property
    def draft(self) -> Handle | None:
        return self._draft

    @property
    def finishing(self) -> bool:
        """True once `finish` delivers the final text: lanes drop draft-only controls then."""
        return self._finishing

    async def update(self, text: str, *, whole: bool = False) -> None:
        """Show `text` (the reply so far) if the throttle allows.

        `whole`: the text stands on its own (a tool's progress line) and no more text may
        come for a while, so it is shown without waiting `first_after`, and an update the
        interval holds back is shown once the interval has passed.
        """
        now = self._clock()
        if self._started is None:
            self._started = now
        if not text.strip() or (not whole and now - self._started < self._first_after):
            return
        preview = _preview(text, self._limit)
        self._pending = preview if whole else None
        wait = self._last_edit + self._interval - now
        if wait > 0:
            if whole and self._later is None:
                self._waiting = True
                self._later = asyncio.create_task(self._show_pending(wait))
            return
        if preview != self._shown:
            await self._show(preview)

    async def finish(self, text: str) -> list[Handle]:
        """Deliver the final text; returns the messages that carry it."""
        self._finishing = True
        later = self._later
        if later is not None:
            if self._waiting:
                later.cancel()
            # A held-back update in flight completes first, so its draft is the one finished.
            with suppress(asyncio.CancelledError):
                await later
        parts = split_message(text, self._limit)
        delivered: list[Handle] = []
        if self._draft is not None:
            try:
                if parts[0] != self._shown:
                    await self._edit(self._draft, parts[0])
                delivered.append(self._draft)
            except DraftGone:
                self._draft = None
        if not delivered:
            delivered.append(await self._send(parts[0]))
        for part in parts[1:]:
            delivered.append(await self._send(part))
        return delivered

    async def _show_pending(self, wait: float) -> None:
        try:
            await asyncio.sleep(wait)
            self._waiting = False
            preview, self._pending = self._pending, None
            if preview is not None and preview != self._shown:
                await self._show(preview)
        except Exception as error:
            # Only the preview is lost: the final text is delivered by `finish` either way.
            log.warning("a draft update failed (%s)", error)
        finally:
            self._later = None

    async def _show(self, preview: str) -> None:
        self._last_edit = self._clock()
        if self._draft is not None:
            try:
                await self._edit(self._draft, preview)
            except DraftGone:
                self._draft = None
        if self._draft is None:
            self._draft = await self._send(preview)
        self._shown = preview


def _preview(text: str, limit: int) -> str:
    room = limit - len(CURSOR)
    if len(text) > room:
        text = text[: room - 1] + "…"
    return text + CURSOR
