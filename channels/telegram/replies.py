"""A turn's reply stream → Telegram messages: typing, one edited draft, final parts.

Telegram's rules live here: 4096 characters per message, flood control (a 429
carries `retry_after`, which is waited out), and formatting that Telegram cannot
parse is re-sent as plain text so a reply is never lost to a stray `*`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from aiogram import Bot
from aiogram.enums import ParseMode
from aiogram.exceptions import TelegramBadRequest, TelegramRetryAfter
from aiogram.methods import EditMessageText, SendMessage, TelegramMethod
from aiogram.types import ReplyParameters
from aiogram.utils.chat_action import ChatActionSender

from bot.turns.events import Delta, Reply, TurnEvent
from channels.drafts import DraftStream

MESSAGE_LIMIT = 4096
TYPING_INTERVAL = 4.0
# Flood-control waits per call before giving up; each waits what Telegram asks.
FLOOD_RETRIES = 3

MethodBuilder = Callable[[ParseMode | None], TelegramMethod[Any]]


@dataclass(frozen=True)
class ReplyTarget:
    """Where a reply goes: the chat, its forum topic, and the message it answers."""

    chat_id: int
    thread_id: int | None = None
    reply_to_message_id: int | None = None


async def deliver_reply(
    bot: Bot,
    target: ReplyTarget,
    events: AsyncIterator[TurnEvent],
    *,
    edit_interval: float = 1.0,
) -> Reply | None:
    """Stream the turn into a draft while typing shows, then deliver the final text."""
    writer = MessageWriter(bot, target)
    draft = DraftStream(send=writer.send, edit=writer.edit, limit=MESSAGE_LIMIT, interval=edit_interval)
    reply: Reply | None = None
    streamed = ""
    async with ChatActionSender.typing(
        bot=bot,
        chat_id=target.chat_id,
        message_thread_id=target.thread_id,
        interval=TYPING_INTERVAL,
    ):
        async for event in events:
            if isinstance(event, Delta):
                streamed += event.text
                await draft.update(streamed)
            elif isinstance(event, Reply):
                reply = event
    if reply is not None and reply.should_send:
        # Drafts are plain text (half a reply rarely has balanced markup); the final one is formatted.
        writer.formatted = True
        await draft.finish(reply.text)
    return reply


class MessageWriter:
    """sendMessage and editMessageText for one reply, with Telegram's failure modes handled."""

    def __init__(self, bot: Bot, target: ReplyTarget) -> None:
        self._bot = bot
        self._target = target
        self._replied = False
        self.formatted = False

    async def send(self, text: str) -> int:
        reply_parameters = None
        if self._target.reply_to_message_id is not None and not self._replied:
            reply_parameters = ReplyParameters(
                message_id=self._target.reply_to_message_id, allow_sending_without_reply=True
            )
        sent = await self._call_formatted(
            lambda parse_mode: SendMessage(
                chat_id=self._target.chat_id,
                message_thread_id=self._target.thread_id,
                text=text,
                parse_mode=parse_mode,
                reply_parameters=reply_parameters,
            )
        )
        self._replied = True
        return int(sent.message_id)

    async def edit(self, message_id: int, text: str) -> None:
        try:
            await self._call_formatted(
                lambda parse_mode: EditMessageText(
                    chat_id=self._target.chat_id,
                    message_id=message_id,
                    text=text,
                    parse_mode=parse_mode,
                )
            )
        except TelegramBadRequest as error:
            if "message is not modified" not in error.message:
                raise

    async def _call_formatted(self, build: MethodBuilder) -> Any:
        if not self.formatted:
            return await self._call(build(None))
        try:
            return await self._call(build(ParseMode.MARKDOWN))
        except TelegramBadRequest as error:
            if "can't parse entities" not in error.message:
                raise
            return await self._call(build(None))

    async def _call(self, method: TelegramMethod[Any]) -> Any:
        for _ in range(FLOOD_RETRIES):
            try:
                return await self._bot(method)
            except TelegramRetryAfter as error:
                await asyncio.sleep(error.retry_after)
        return await self._bot(method)
