"""aiogram middlewares of the Telegram lane: re-delivered updates and allow-lists."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiogram import BaseMiddleware
from aiogram.dispatcher.event.bases import UNHANDLED
from aiogram.types import Message, TelegramObject, Update

Handler = Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]]


class SkipSeenUpdates(BaseMiddleware):
    """Drops an update id this process already took (a retried webhook, a repeated poll).

    Only a fast path: the engine's idempotent ingestion by message id is what keeps
    a duplicate from being answered after a restart or on another instance.
    """

    def __init__(self, remember: int = 10_000) -> None:
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._remember = remember

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        if not isinstance(event, Update):
            raise TypeError(f"SkipSeenUpdates sees updates, got {type(event).__name__}")
        if event.update_id in self._seen:
            return UNHANDLED
        self._seen[event.update_id] = None
        if len(self._seen) > self._remember:
            self._seen.popitem(last=False)
        return await handler(event, data)


class AllowList(BaseMiddleware):
    """Optional allow-lists: `users` (ids or usernames) anywhere, `chats` (ids) for groups.

    An empty list allows everyone. Private chats are governed by `users` alone.
    """

    def __init__(self, users: Iterable[str], chats: Iterable[str]) -> None:
        self._users = {name for entry in users if (name := entry.strip().lstrip("@").lower())}
        self._chats = {chat for entry in chats if (chat := entry.strip())}

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        if not isinstance(event, Message):
            raise TypeError(f"AllowList sees messages, got {type(event).__name__}")
        if self.allows(event):
            return await handler(event, data)
        return UNHANDLED

    def allows(self, message: Message) -> bool:
        sender = message.from_user
        if self._users:
            names = {str(sender.id), (sender.username or "").lower()} if sender else set()
            if not names & self._users:
                return False
        if self._chats and message.chat.type != "private":
            return str(message.chat.id) in self._chats
        return True
