"""Streaming a reply into a platform draft: one streamer, one playback, for every chat lane.

`play` reads a turn's events (`Delta`s, tool steps, thinking) into the text a draft
shows; `DraftStreamer` shows that text through a `DraftView` beside the turn, so a slow
platform call never holds up the model's stream, never faster than the interval the
platform allows. A lane plugs its rules in as hooks: how a preview renders, flood
control (`not_before`, `retry_after`), a group's message budget (`allows`), and the view
itself — a native draft (Telegram's sendMessageDraft) or `EditedDraft`, a message edited
in place. Failures only cost the draft: the final text is delivered by `finish` either way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from typing import Generic, Protocol, TypeVar

from bot.errors import LaneError
from bot.turns.events import Reply, ToolStep, TurnEvent
from channels.progress import TurnPreview

Part = TypeVar("Part")
Handle = TypeVar("Handle")
CURSOR = " ▌"

log = logging.getLogger(__name__)


class DraftGone(LaneError):
    """Raised by a lane's edit when the draft message no longer exists or can't be edited."""


class DraftView(Protocol[Part]):
    """How a reply shows while it streams, and how its final parts arrive."""

    @property
    def cursor(self) -> str: ...

    async def show(self, preview: Part) -> None: ...

    async def finish(self, parts: list[Part]) -> None: ...


class EditedDraft(Generic[Part, Handle]):
    """A message that is sent, edited while the reply streams, and finished in place.

    `handle`: a draft an earlier process left (a recovered turn), edited into this reply;
    `on_draft` learns each draft once it is sent, so a restart can finish it. When the
    draft is gone, the next preview sends a new one; when finishing it fails with one of
    `finish_errors`, it is deleted (if the lane can) and the final text sent anew.
    """

    cursor = CURSOR

    def __init__(
        self,
        *,
        send: Callable[[Part], Awaitable[Handle]],
        edit: Callable[[Handle, Part, bool], Awaitable[None]],
        delete: Callable[[Handle], Awaitable[None]] | None = None,
        handle: Handle | None = None,
        on_draft: Callable[[Handle], Awaitable[None]] | None = None,
        finish_errors: tuple[type[BaseException], ...] = (DraftGone,),
    ) -> None:
        self._send = send
        self._edit = edit
        self._delete = delete
        self._handle = handle
        self._on_draft = on_draft
        self._finish_errors = finish_errors
        self._shown: Part | None = None
        self.finishing = False

    @property
    def handle(self) -> Handle | None:
        return self._handle

    async def show(self, preview: Part) -> None:
        if self._handle is None:
            self._handle = await self._send(preview)
            if self._on_draft is not None:
                await self._on_draft(self._handle)
        else:
            try:
                await self._edit(self._handle, preview, False)
            except DraftGone:
                # Someone deleted the draft: the next update sends a new one.
                self._handle = None
                raise
        self._shown = preview

    async def finish(self, parts: list[Part]) -> None:
        self.finishing = True
        first, rest = parts[0], parts[1:]
        if self._handle is None:
            await self._send(first)
        elif self._shown != first:
            try:
                await self._edit(self._handle, first, True)
            except self._finish_errors as error:
                log.warning("could not finish the draft (%s); sending the reply as a new message", error)
                if self._delete is not None:
                    await self._delete(self._handle)
                await self._send(first)
        for part in rest:
            await self._send(part)


def _never_flooded() -> float:
    return 0.0


def _always() -> bool:
    return True


def _no_retry_after(error: Exception) -> float | None:
    return None


class DraftStreamer(Generic[Part]):
    """Shows the reply so far through a `DraftView`, never faster than `interval`.

    Hooks a lane fills in:
    - `render(text, speaker, cursor)`: the preview of the reply so far.
    - `ready(text)`: the first text stands on its own (a phrase, not a token) and shows at
      once; otherwise it waits until `first_wait` seconds after the first update.
    - `not_before()`: flood control's earliest next call (`clock` time).
    - `retry_after(error)`: seconds a refused call asks to wait (flood control), or None.
    - `allows()`: False while a group's message budget is kept for the final text.
    - `failures`/`max_failures`: errors that only cost one preview, and after how many of
      them drafting stops for this reply (None: never).
    """

    def __init__(
        self,
        view: DraftView[Part],
        *,
        render: Callable[[str, str | None, str], Part],
        interval: float,
        first_wait: float,
        ready: Callable[[str], bool],
        source_chars: int | None = None,
        not_before: Callable[[], float] = _never_flooded,
        retry_after: Callable[[Exception], float | None] = _no_retry_after,
        allows: Callable[[], bool] = _always,
        failures: tuple[type[Exception], ...] = (),
        max_failures: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._view = view
        self._render = render
        self._interval = interval
        self._first_wait = first_wait
        self._ready = ready
        self._source_chars = source_chars
        self._not_before = not_before
        self._retry_after = retry_after
        self._allows = allows
        self._failure_types = failures
        self._max_failures = max_failures
        self._clock = clock
        self._text = ""
        self._speaker: str | None = None
        self._whole = False
        self._started_at: float | None = None
        self._shown_text: str | None = None
        self._next_at = 0.0
        self._failures = 0
        self._wake = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    def update(self, text: str, speaker: str | None = None, *, whole: bool = False) -> None:
        """`whole`: the text stands on its own (progress lines), shown without waiting for a phrase."""
        if not text.strip():
            return
        if self._source_chars is not None:
            text = text[: self._source_chars]
        self._text, self._speaker, self._whole = text, speaker, whole
        if self._started_at is None:
            self._started_at = self._clock()
        if self._task is None:
            self._task = asyncio.create_task(self._run())
        self._wake.set()

    async def close(self) -> None:
        """Stop drafting; a call in flight completes first, so its result is known."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        while not self._closing:
            delay = self._delay()
            self._wake.clear()
            if delay is None or delay > 0:
                with suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wake.wait()
                continue
            if not await self._show():
                return

    def _delay(self) -> float | None:
        """Seconds until the next show; None while there is nothing new to show."""
        if self._text == self._shown_text or self._started_at is None:
            return None
        due = max(self._next_at, self._not_before())
        if self._shown_text is None and not self._whole and not self._ready(self._text):
            due = max(due, self._started_at + self._first_wait)
        return max(due - self._clock(), 0.0)

    async def _show(self) -> bool:
        """One draft update; False when drafting should stop for this reply."""
        text = self._text
        preview = self._render(text, self._speaker, self._view.cursor)
        self._next_at = self._clock() + self._interval
        if not self._allows():
            # The group's budget is for the final text now; try again after the interval.
            return True
        try:
            await self._view.show(preview)
        except DraftGone:
            return True
        except Exception as error:
            wait = self._retry_after(error)
            if wait is not None:
                log.info("flood control on a draft; next update in %s s", wait)
                self._next_at = max(self._next_at, self._not_before())
                return True
            if not isinstance(error, self._failure_types):
                raise
            self._failures += 1
            log.warning("draft update failed (%s); the final text is still sent", error)
            return self._max_failures is None or self._failures < self._max_failures
        self._shown_text = text
        return True


async def play(
    events: AsyncIterator[TurnEvent],
    streamer: DraftStreamer[Part],
    *,
    ask: Callable[[ToolStep], Awaitable[None]],
    before: Callable[[TurnEvent], Awaitable[None]] | None = None,
    on_reply: Callable[[Reply], Awaitable[None]] | None = None,
) -> Reply | None:
    """Read a turn's events into its draft; returns the turn's `Reply`.

    `ask`: a tool's question needs buttons, so it goes as a message of its own, never
    the draft. `before` sees every streamed event first (a lane resolving its speaker);
    `on_reply` delivers the reply as soon as it arrives, while the stream is still read.
    """
    preview = TurnPreview()
    reply: Reply | None = None
    async for event in events:
        if isinstance(event, Reply):
            reply = event
            if on_reply is not None:
                await on_reply(event)
            continue
        if before is not None:
            await before(event)
        if isinstance(event, ToolStep) and event.status == "asked":
            await ask(event)
        streamer.update(preview.add(event), event.persona_name, whole=preview.shows_progress)
    return reply
