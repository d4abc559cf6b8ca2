"""Reminders on Telegram: sent to the chat (and forum topic) they were set in.

The message is formatted and split like every reply, under the name of the persona that
set it (one bot account speaks for every persona). Telegram's refusals become the
reminder service's: a 429 says how long to wait; a blocked bot, a deleted chat or a
chat the bot left is not tried again.
"""

from __future__ import annotations

from aiogram import Bot
from aiogram.exceptions import (
    TelegramAPIError,
    TelegramBadRequest,
    TelegramForbiddenError,
    TelegramNotFound,
    TelegramRetryAfter,
)

from bot.errors import DeliveryRefused
from bot.reminders.delivery import ReminderDelivery
from channels.telegram.formatting import render, split
from channels.telegram.replies import GroupBudget, MessageWriter, ReplyTarget


class TelegramReminders:
    """The Telegram lane's `ReminderLane`."""

    def __init__(self, bot: Bot, budget: GroupBudget) -> None:
        self.bot = bot
        self.budget = budget

    async def deliver(self, delivery: ReminderDelivery) -> str | None:
        address = delivery.address
        target = ReplyTarget(
            chat_id=int(address.chat_id), thread_id=int(address.thread_id) if address.thread_id else None
        )
        writer = MessageWriter(self.bot, target, self.budget)
        try:
            parts = split(render(delivery.text, speaker=delivery.persona.name))
            sent = [await writer.send(part) for part in parts]
        except TelegramRetryAfter as error:
            raise DeliveryRefused(error.message, retry_after=float(error.retry_after)) from error
        except (TelegramForbiddenError, TelegramNotFound, TelegramBadRequest) as error:
            raise DeliveryRefused(error.message, permanent=True) from error
        except TelegramAPIError as error:
            raise DeliveryRefused(error.message) from error
        return str(sent[0]) if sent else None
