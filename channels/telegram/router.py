"""The aiogram `Router` of the Telegram lane: which messages become turns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiogram import F, Router
from aiogram.types import CallbackQuery, Message, MessageGenerationStopped

from channels.telegram.albums import AlbumCollector
from channels.telegram.approvals import ApprovalCallback
from channels.telegram.middlewares import AllowList
from channels.telegram.translate import GROUP_TYPES, PRIVATE, unsupported_kind

MessagesHandler = Callable[[list[Message]], Awaitable[None]]
MessageHandler = Callable[[Message], Awaitable[None]]
StopHandler = Callable[[MessageGenerationStopped], Awaitable[None]]
ApprovalHandler = Callable[[CallbackQuery, ApprovalCallback], Awaitable[None]]


def build_router(
    on_messages: MessagesHandler,
    albums: AlbumCollector,
    allow: AllowList,
    *,
    on_unsupported: MessageHandler,
    on_stop: StopHandler,
    on_approval: ApprovalHandler,
) -> Router:
    """Text, photos, documents, voice notes, audio and round videos from people in chats and groups.

    Commands need no handlers of their own: the engine answers them, the same
    set on every lane, so they arrive here as text. Stickers, locations and
    other kinds Chorus cannot read go to `on_unsupported`; a press of a native
    draft's Stop button goes to `on_stop`, and a press of a tool call's Run or Deny
    button to `on_approval` (who may decide is the approvals' own check).
    """
    router = Router(name="chorus")
    router.message.outer_middleware(allow)
    router.message.filter(F.chat.type.in_(GROUP_TYPES | {PRIVATE}), F.from_user)

    @router.message(F.media_group_id, F.photo | F.document | F.audio)
    async def album_item(message: Message) -> None:
        albums.add(message)

    @router.message(F.text | F.photo | F.document | F.voice | F.audio | F.video_note)
    async def single_message(message: Message) -> None:
        await on_messages([message])

    @router.message(F.func(unsupported_kind))
    async def unsupported(message: Message) -> None:
        await on_unsupported(message)

    @router.callback_query(ApprovalCallback.filter())
    async def approval(query: CallbackQuery, callback_data: ApprovalCallback) -> None:
        await on_approval(query, callback_data)

    @router.stopped_message_generation()
    async def stopped(event: MessageGenerationStopped) -> None:
        await on_stop(event)

    return router
