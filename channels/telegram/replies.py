"""A turn's reply stream → Telegram messages: typing, a streamed draft, the final parts.

Private chats stream natively with sendMessageDraft (Bot API 9.3), then the final
text arrives as one new message; groups get a draft message edited at a throttled
rate that becomes the first part of the final text. Every reply of a persona starts
with its name in bold. Telegram's rules live here: 4096 UTF-16 units per message,
flood control (a 429's `retry_after` is waited out, and the next call still keeps
the interval), 20 messages a minute per group. A draft that fails — flood control
that does not let up, a draft message someone deleted — never costs the reply: the
final text is then sent as a new message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError, TelegramBadRequest, TelegramRetryAfter
from aiogram.methods import (
    DeleteMessage,
    EditMessageText,
    SendMessage,
    SendMessageDraft,
    TelegramMethod,
)
from aiogram.types import ReplyParameters
from aiogram.utils.chat_action import ChatActionSender
from aiohttp import ClientError

from bot.turns.events import Reply, ToolStep, TurnEvent
from channels.progress import TurnPreview
from channels.telegram.approvals import ask
from channels.telegram.formatting import TelegramText, folded_reasoning, plain, render, split

log = logging.getLogger(__name__)

TYPING_INTERVAL = 4.0
# Flood-control waits per call of the final text before giving up on that call.
FLOOD_RETRIES = 5
# The first text a draft shows (and a push notification quotes) is a phrase, not a token:
# this many characters or a line break, or whatever arrived after FIRST_CHUNK_WAIT seconds.
FIRST_CHUNK_CHARS = 40
FIRST_CHUNK_WAIT = 1.5
# Draft calls that fail for other reasons than flood control before drafting stops.
DRAFT_FAILURES = 3
CURSOR = " ▌"
# A draft shows the first message's worth of the reply; rendering more of it would only cost time.
DRAFT_SOURCE_CHARS = 8192
# Telegram: at most 20 messages a minute to one group; edits count too.
GROUP_MESSAGES_PER_MINUTE = 20
# Kept free for the final parts of a reply when draft edits use the group's budget.
GROUP_RESERVE = 3


class DraftLost(Exception):
    """The draft message is gone (deleted) or can no longer be edited."""


class GroupBudget:
    """Messages sent and edited per group chat in the last minute, as Telegram counts them."""

    def __init__(
        self, per_minute: int = GROUP_MESSAGES_PER_MINUTE, clock: Callable[[], float] = time.monotonic
    ):
        self._per_minute = per_minute
        self._clock = clock
        self._spent: dict[int, deque[float]] = {}

    def spend(self, chat_id: int) -> None:
        self._window(chat_id).append(self._clock())

    def allows_draft(self, chat_id: int) -> bool:
        return len(self._window(chat_id)) < self._per_minute - GROUP_RESERVE

    def _window(self, chat_id: int) -> deque[float]:
        spent = self._spent.setdefault(chat_id, deque())
        now = self._clock()
        while spent and now - spent[0] >= 60:
            spent.popleft()
        return spent


@dataclass(frozen=True)
class ReplyTarget:
    """Where a reply goes: the chat, its forum topic, the message it answers.

    `draft_id` (non-zero) streams the reply natively with sendMessageDraft; 0 streams
    it into a message that is edited.
    """

    chat_id: int
    thread_id: int | None = None
    reply_to_message_id: int | None = None
    draft_id: int = 0

    @property
    def is_group(self) -> bool:
        return self.chat_id < 0


@dataclass
class DeliveryOptions:
    edit_interval: float = 1.0
    group_edit_interval: float = 3.0
    budget: GroupBudget = field(default_factory=GroupBudget)


async def deliver_reply(
    bot: Bot,
    target: ReplyTarget,
    events: AsyncIterator[TurnEvent],
    options: DeliveryOptions | None = None,
    *,
    left_draft: int | None = None,
    on_draft: Callable[[int], Awaitable[None]] | None = None,
) -> Reply | None:
    """Stream the turn into a draft while typing shows, then deliver the final text.

    `left_draft`: a draft message an earlier process left (a recovered turn), edited
    into this reply; `on_draft` learns the id of a draft message once one is sent, so
    a restart can finish it.
    """
    options = options or DeliveryOptions()
    writer = MessageWriter(bot, target, options.budget)
    view: DraftView = (
        NativeDraft(writer, target.draft_id)
        if target.draft_id and left_draft is None
        else EditedDraft(writer, left_draft, on_draft)
    )
    interval = options.group_edit_interval if target.is_group else options.edit_interval
    streamer = DraftStreamer(view, writer, interval=max(interval, options.edit_interval))
    reply: Reply | None = None
    preview = TurnPreview()
    try:
        async with ChatActionSender.typing(
            bot=bot, chat_id=target.chat_id, message_thread_id=target.thread_id, interval=TYPING_INTERVAL
        ):
            async for event in events:
                if isinstance(event, Reply):
                    reply = event
                elif isinstance(event, ToolStep) and event.status == "asked":
                    # The question needs buttons: a message of its own, never the draft.
                    await ask(bot, target.chat_id, target.thread_id, event)
                    streamer.update(preview.add(event), event.persona_name, whole=preview.shows_progress)
                else:
                    shown = preview.add(event)
                    streamer.update(shown, event.persona_name, whole=preview.shows_progress)
    finally:
        await streamer.close()
    if reply is not None and reply.should_send and reply.text.strip():
        speaker = reply.persona_name if reply.kind == "assistant" else None
        parts = split(render(reply.text, speaker=speaker))
        if not any(part.text.strip() for part in parts):
            # Markdown that renders to nothing visible: show what the model wrote.
            parts = split(plain(reply.text.strip()))
        if reply.reasoning:
            # /reasoning on: the thinking comes first, folded, in a message of its own.
            parts = [folded_reasoning(reply.reasoning), *parts]
        await view.finish(parts)
    return reply


async def send_text(bot: Bot, target: ReplyTarget, text: str, budget: GroupBudget | None = None) -> None:
    """A short answer of the lane itself (no turn), formatted like every reply."""
    writer = MessageWriter(bot, target, budget or GroupBudget())
    for part in split(render(text)):
        await writer.send(part)


class MessageWriter:
    """The Bot API calls of one reply, with Telegram's failure modes handled."""

    def __init__(self, bot: Bot, target: ReplyTarget, budget: GroupBudget) -> None:
        self._bot = bot
        self._target = target
        self._budget = budget
        self._replied = False
        # Flood control: no call before this moment (time.monotonic()).
        self.flood_until = 0.0

    @property
    def target(self) -> ReplyTarget:
        return self._target

    def allows_draft(self) -> bool:
        return not self._target.is_group or self._budget.allows_draft(self._target.chat_id)

    async def send(self, part: TelegramText) -> int:
        reply_parameters = None
        if self._target.reply_to_message_id is not None and not self._replied:
            reply_parameters = ReplyParameters(
                message_id=self._target.reply_to_message_id, allow_sending_without_reply=True
            )

        def build(shown: TelegramText) -> SendMessage:
            return SendMessage(
                chat_id=self._target.chat_id,
                message_thread_id=self._target.thread_id,
                text=shown.text,
                entities=shown.entities or None,
                reply_parameters=reply_parameters,
            )

        sent = await self._final(build, part)
        self._replied = True
        return int(sent.message_id)

    async def edit(self, message_id: int, part: TelegramText, *, final: bool) -> None:
        def build(shown: TelegramText) -> EditMessageText:
            return EditMessageText(
                chat_id=self._target.chat_id,
                message_id=message_id,
                text=shown.text,
                entities=shown.entities or None,
            )

        try:
            if final:
                await self._final(build, part)
            else:
                await self._once(build(part))
        except TelegramBadRequest as error:
            if "message is not modified" in error.message:
                return
            if "message to edit not found" in error.message or "can't be edited" in error.message:
                raise DraftLost(error.message) from error
            raise

    async def draft(self, draft_id: int, part: TelegramText) -> None:
        await self._once(
            SendMessageDraft(
                chat_id=self._target.chat_id,
                draft_id=draft_id,
                message_thread_id=self._target.thread_id,
                text=part.text,
                entities=part.entities or None,
                can_stop=True,
                keep_on_stop=True,
            )
        )

    async def delete(self, message_id: int) -> None:
        with suppress(TelegramAPIError, ClientError, TimeoutError):
            await self._once(DeleteMessage(chat_id=self._target.chat_id, message_id=message_id))

    async def _once(self, method: TelegramMethod[Any]) -> Any:
        """One call; a 429 is remembered (the next call waits) and raised."""
        try:
            result = await self._bot(method)
        except TelegramRetryAfter as error:
            self.flood_until = time.monotonic() + error.retry_after
            raise
        if self._target.is_group and not isinstance(method, SendMessageDraft | DeleteMessage):
            self._budget.spend(self._target.chat_id)
        return result

    async def _final(self, build: Callable[[TelegramText], TelegramMethod[Any]], part: TelegramText) -> Any:
        """A call that must get through: 429s are waited out; rejected formatting goes as plain text."""
        method = build(part)
        for attempt in range(FLOOD_RETRIES + 1):
            await self._wait_flood()
            try:
                return await self._once(method)
            except TelegramRetryAfter:
                if attempt == FLOOD_RETRIES:
                    raise
            except TelegramBadRequest as error:
                if not part.entities or not _rejects_entities(error.message):
                    raise
                log.warning(
                    "Telegram refused a reply's formatting (%s); sending it as plain text", error.message
                )
                method = build(plain(part.text))
        raise AssertionError("unreachable")

    async def _wait_flood(self) -> None:
        delay = self.flood_until - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


def _rejects_entities(description: str) -> bool:
    lowered = description.lower()
    return "entit" in lowered or "can't parse" in lowered


class DraftView(Protocol):
    """How a reply shows while it streams, and how its final parts arrive."""

    cursor: str

    async def show(self, preview: TelegramText) -> None: ...

    async def finish(self, parts: list[TelegramText]) -> None: ...


class NativeDraft:
    """sendMessageDraft in a private chat; the final text is one new message (per part)."""

    cursor = ""

    def __init__(self, writer: MessageWriter, draft_id: int) -> None:
        self._writer = writer
        self._draft_id = draft_id

    async def show(self, preview: TelegramText) -> None:
        await self._writer.draft(self._draft_id, preview)

    async def finish(self, parts: list[TelegramText]) -> None:
        for part in parts:
            await self._writer.send(part)


class EditedDraft:
    """A message that is sent, edited while the reply streams, and finished in place."""

    cursor = CURSOR

    def __init__(
        self,
        writer: MessageWriter,
        message_id: int | None = None,
        on_draft: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self._writer = writer
        self._message_id = message_id
        self._on_draft = on_draft
        self._shown: TelegramText | None = None

    async def show(self, preview: TelegramText) -> None:
        if self._message_id is None:
            self._message_id = await self._writer.send(preview)
            if self._on_draft is not None:
                await self._on_draft(self._message_id)
        else:
            try:
                await self._writer.edit(self._message_id, preview, final=False)
            except DraftLost:
                # Someone deleted the draft: the next update sends a new one.
                self._message_id = None
                raise
        self._shown = preview

    async def finish(self, parts: list[TelegramText]) -> None:
        first, rest = parts[0], parts[1:]
        if self._message_id is None:
            await self._writer.send(first)
        elif self._shown != first:
            try:
                await self._writer.edit(self._message_id, first, final=True)
            except (DraftLost, TelegramAPIError, ClientError, TimeoutError) as error:
                log.warning("could not finish the draft (%s); sending the reply as a new message", error)
                await self._writer.delete(self._message_id)
                await self._writer.send(first)
        for part in rest:
            await self._writer.send(part)


class DraftStreamer:
    """Shows the reply so far through a `DraftView`, never faster than `interval`.

    It runs beside the turn, so a slow Telegram call never holds up the model's
    stream, and a stalled stream still shows what arrived. Failures only cost
    the draft: the final text is delivered by `DraftView.finish` either way.
    """

    def __init__(
        self,
        view: DraftView,
        writer: MessageWriter,
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._view = view
        self._writer = writer
        self._interval = interval
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

    def update(self, text: str, speaker: str | None, *, whole: bool = False) -> None:
        """`whole`: the text stands on its own (progress lines), shown without waiting for a phrase."""
        if not text.strip():
            return
        self._text, self._speaker, self._whole = text[:DRAFT_SOURCE_CHARS], speaker, whole
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
        due = max(self._next_at, self._writer.flood_until)
        if self._shown_text is None and not self._whole and not _meaningful(self._text):
            due = max(due, self._started_at + FIRST_CHUNK_WAIT)
        return max(due - self._clock(), 0.0)

    async def _show(self) -> bool:
        """One draft update; False when drafting should stop for this reply."""
        text = self._text
        preview = split(render(text, speaker=self._speaker))[0].with_suffix(self._view.cursor)
        self._next_at = self._clock() + self._interval
        if not self._writer.allows_draft():
            # The group's budget is for the final text now; try again after the interval.
            return True
        try:
            await self._view.show(preview)
        except TelegramRetryAfter as error:
            log.info("Telegram flood control on a draft; next update in %s s", error.retry_after)
            self._next_at = max(self._next_at, self._writer.flood_until)
            return True
        except DraftLost:
            return True
        except (TelegramAPIError, ClientError, TimeoutError) as error:
            self._failures += 1
            log.warning("draft update failed (%s); the final text is still sent", error)
            return self._failures < DRAFT_FAILURES
        self._shown_text = text
        return True


def _meaningful(text: str) -> bool:
    stripped = text.strip()
    return len(stripped) >= FIRST_CHUNK_CHARS or "\n" in stripped
