"""A tool call waiting for a yes or no, as a Telegram message with Run and Deny buttons.

The buttons carry the approval's id (`ApprovalCallback`); a press arrives as a callback
query, which the lane passes to `Approvals.decide` as `telegram:<user id>`. The message
then says who decided, and its buttons go: a second press (or one after a restart)
decides nothing and is told so.
"""

from __future__ import annotations

from aiogram import Bot
from aiogram.filters.callback_data import CallbackData
from aiogram.types import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message

from bot.turns.approvals import Approvals
from bot.turns.events import ToolStep

LANE = "telegram"


class ApprovalCallback(CallbackData, prefix="approval"):
    approval_id: int
    answer: str  # "yes" | "no"


def approval_keyboard(approval_id: int) -> InlineKeyboardMarkup:
    def button(text: str, answer: str) -> InlineKeyboardButton:
        return InlineKeyboardButton(
            text=text, callback_data=ApprovalCallback(approval_id=approval_id, answer=answer).pack()
        )

    return InlineKeyboardMarkup(inline_keyboard=[[button("Run", "yes"), button("Deny", "no")]])


async def ask(bot: Bot, chat_id: int, thread_id: int | None, step: ToolStep) -> None:
    """Show the call and its question, with the buttons that answer it."""
    if step.approval_id is None:
        return
    await bot.send_message(
        chat_id=chat_id,
        message_thread_id=thread_id,
        text=step.progress_line,
        reply_markup=approval_keyboard(step.approval_id),
    )


async def answer(approvals: Approvals, query: CallbackQuery, data: ApprovalCallback) -> None:
    """A press of Run or Deny: decided once, the presser told, the buttons gone once decided."""
    decided = await approvals.decide(data.approval_id, data.answer == "yes", f"{LANE}:{query.from_user.id}")
    await query.answer(decided.text)
    message = query.message
    if decided.ok and isinstance(message, Message) and message.text:
        who = query.from_user.full_name
        await message.edit_text(f"{message.text}\n{decided.text} ({who})", reply_markup=None)
