"""The aiogram `Router` of the Telegram lane: which messages become turns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiogram import F, Router
from aiogram.types import Message

from channels.telegram.albums import AlbumCollector
from channels.telegram.middlewares import AllowList
from channels.telegram.translate import GROUP_TYPES, PRIVATE

MessagesHandler = Callable[[list[Message]], Awaitable[None]]


def build_router(on_messages: MessagesHandler, albums: AlbumCollector, allow: AllowList) -> Router:
    """Text, photos and documents from people in private chats and groups.

    Commands need no handlers of their own: the engine answers them, the same
    set on every lane, so they arrive here as text.
    """
    router = Router(name="chorus")
    router.message.outer_middleware(allow)
    router.message.filter(
        F.chat.type.in_(GROUP_TYPES | {PRIVATE}),
        F.from_user,
        F.text | F.photo | F.document,
    )

    @router.message(F.media_group_id)
    async def album_item(message: Message) -> None:
        albums.add(message)

    @router.message()
    async def single_message(message: Message) -> None:
        await on_messages([message])

    return router
