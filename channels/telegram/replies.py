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
from typing import Any

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
from channels.drafts import DraftGone, DraftStreamer, DraftView, EditedDraft, play
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
# A draft shows the first message's worth of the reply; rendering more of it would only cost time.
DRAFT_SOURCE_CHARS = 8192
# Telegram: at most 20 messages a minute to one group; edits count too.
GROUP_MESSAGES_PER_MINUTE = 20
# Kept free for the final parts of a reply when draft edits use the group's budget.
GROUP_RESERVE = 3


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
    view: DraftView[TelegramText] = (
        NativeDraft(writer, target.draft_id)
        if target.draft_id and left_draft is None
        else edited_draft(writer, left_draft, on_draft)
    )
    interval = options.group_edit_interval if target.is_group else options.edit_interval
    streamer = draft_streamer(view, writer, interval=max(interval, options.edit_interval))

    async def ask_in_chat(step: ToolStep) -> None:
        await ask(bot, target.chat_id, target.thread_id, step)

    try:
        async with ChatActionSender.typing(
            bot=bot, chat_id=target.chat_id, message_thread_id=target.thread_id, interval=TYPING_INTERVAL
        ):
            reply = await play(events, streamer, ask=ask_in_chat)
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
                raise DraftGone(error.message) from error
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


def edited_draft(
    writer: MessageWriter,
    message_id: int | None = None,
    on_draft: Callable[[int], Awaitable[None]] | None = None,
) -> EditedDraft[TelegramText, int]:
    """A draft message edited in place; finishing it may fail for any of Telegram's reasons."""

    async def edit(message_id: int, part: TelegramText, final: bool) -> None:
        await writer.edit(message_id, part, final=final)

    return EditedDraft(
        send=writer.send,
        edit=edit,
        delete=writer.delete,
        handle=message_id,
        on_draft=on_draft,
        finish_errors=(DraftGone, TelegramAPIError, ClientError, TimeoutError),
    )


def draft_streamer(
    view: DraftView[TelegramText], writer: MessageWriter, *, interval: float
) -> DraftStreamer[TelegramText]:
    """Telegram's rules for a streaming draft: its flood control, a group's budget, a phrase first."""

    def preview(text: str, speaker: str | None, cursor: str) -> TelegramText:
        return split(render(text, speaker=speaker))[0].with_suffix(cursor)

    def retry_after(error: Exception) -> float | None:
        return error.retry_after if isinstance(error, TelegramRetryAfter) else None

    return DraftStreamer(
        view,
        render=preview,
        interval=interval,
        first_wait=FIRST_CHUNK_WAIT,
        ready=_meaningful,
        source_chars=DRAFT_SOURCE_CHARS,
        not_before=lambda: writer.flood_until,
        retry_after=retry_after,
        allows=writer.allows_draft,
        failures=(TelegramAPIError, ClientError, TimeoutError),
        max_failures=DRAFT_FAILURES,
    )


def _meaningful(text: str) -> bool:
    stripped = text.strip()
    return len(stripped) >= FIRST_CHUNK_CHARS or "\n" in stripped
