"""Streaming a reply into one platform message by throttled edits."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from channels.text import split_message

Handle = TypeVar("Handle")
CURSOR = " ▌"


class DraftStream(Generic[Handle]):
    """Shows a reply while it streams, then delivers the final text in parts.

    The first update sends a draft message; later updates edit it at most once
    per `interval` seconds (platforms rate-limit edits). `finish` edits the draft
    into the first part of the final text and sends any further parts.
    """

    def __init__(
        self,
        *,
        send: Callable[[str], Awaitable[Handle]],
        edit: Callable[[Handle, str], Awaitable[None]],
        limit: int,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        draft: Handle | None = None,
        on_draft: Callable[[Handle], Awaitable[None]] | None = None,
    ) -> None:
        self._send = send
        self._edit = edit
        self._limit = limit
        self._interval = interval
        self._clock = clock
        # A draft left by an earlier process (a recovered turn) is edited, not sent again.
        self._draft: Handle | None = draft
        self._on_draft = on_draft
        self._shown = ""
        self._last_edit = float("-inf")

    @property
    def draft(self) -> Handle | None:
        return self._draft

    async def update(self, text: str) -> None:
        """Show `text` (the reply so far) if the throttle allows."""
        if not text.strip() or self._clock() - self._last_edit < self._interval:
            return
        preview = _preview(text, self._limit)
        if preview == self._shown:
            return
        await self._show(preview)

    async def finish(self, text: str) -> list[Handle]:
        """Deliver the final text; returns the messages that carry it."""
        parts = split_message(text, self._limit)
        delivered: list[Handle] = []
        if self._draft is not None:
            if parts[0] != self._shown:
                await self._edit(self._draft, parts[0])
            delivered.append(self._draft)
        else:
            delivered.append(await self._send(parts[0]))
        for part in parts[1:]:
            delivered.append(await self._send(part))
        return delivered

    async def _show(self, preview: str) -> None:
        self._last_edit = self._clock()
        if self._draft is None:
            self._draft = await self._send(preview)
            if self._on_draft is not None:
                await self._on_draft(self._draft)
        else:
            await self._edit(self._draft, preview)
        self._shown = preview


def _preview(text: str, limit: int) -> str:
    room = limit - len(CURSOR)
    if len(text) > room:
        text = text[: room - 1] + "…"
    return text + CURSOR
