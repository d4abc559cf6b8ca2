"""`TelegramLane`: the bot, its dispatcher, and how updates arrive (polling or webhook)."""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from functools import partial
from urllib.parse import urlsplit

from aiogram import Bot, Dispatcher
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import PRODUCTION, TelegramAPIServer
from aiogram.exceptions import TelegramUnauthorizedError
from aiogram.types import BotCommand, Message, MessageGenerationStopped, Update, User
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from bot.errors import ConfigError
from bot.recovery import Delivery
from bot.runtime import Runtime
from bot.turns.events import TurnEvent
from bot.turns.inbound import Actor, InboundMessage
from channels.telegram.albums import AlbumCollector
from channels.telegram.approvals import answer as answer_approval
from channels.telegram.middlewares import AllowList, SkipSeenUpdates
from channels.telegram.polling import RETRY_FIRST, UpdatePoller
from channels.telegram.reminders import TelegramReminders
from channels.telegram.replies import DeliveryOptions, ReplyTarget, deliver_reply, send_text
from channels.telegram.router import build_router
from channels.telegram.translate import (
    bot_names,
    is_addressed,
    is_for_another_bot,
    to_inbound,
    unsupported_kind,
    unsupported_reply,
)
from channels.telegram.voice import send_spoken_reply

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
DEFAULT_WEBHOOK_PATH = "/telegram/webhook"
LANE = "telegram"
SECOND_POLLER = (
    "Another process already polls Telegram for @{bot} on this database. Telegram hands a bot's "
    "updates to one poller only, so polling runs in one process: to run several processes, set "
    "channels.telegram.mode: webhook (see docs/scaling.md, “Running on several machines”), or stop "
    "the other process first."
)
POLLING_CONFLICT = (
    "Telegram ended this process's polling: {reason}. Another process polls Telegram for @{bot} "
    "(or a webhook is set): polling runs in one process only. Stop the other poller, or run every "
    "process with channels.telegram.mode: webhook (see docs/scaling.md, “Running on several machines”)."
)
# Telegram's rule for a bot command name.
COMMAND_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789_")


class TelegramLane:
    """Serves the Telegram bot for `chorus serve`.

    `edit_interval` throttles draft updates (Telegram allows about one per second),
    `group_edit_interval` those in groups (20 messages a minute per group);
    `album_delay` is how long an album may take to arrive in full. `native_drafts`
    streams private replies with sendMessageDraft instead of an edited message.
    """

    name = LANE

    def __init__(
        self,
        runtime: Runtime,
        *,
        edit_interval: float = 1.0,
        group_edit_interval: float = 3.0,
        album_delay: float = 0.8,
        native_drafts: bool = True,
        retry_first: float = RETRY_FIRST,
    ) -> None:
        settings = runtime.settings.channels.telegram
        if settings.token is None:
            raise ConfigError("Set CHORUS_TELEGRAM_TOKEN to the token @BotFather gave you.")
        if settings.mode == "webhook" and (not settings.webhook_url or not settings.webhook_secret):
            raise ConfigError(
                "Telegram webhook mode needs channels.telegram.webhook_url (the public URL "
                "Telegram posts to) and CHORUS_TELEGRAM_WEBHOOK_SECRET."
            )
        self.settings = settings
        self.engine = runtime.engine
        self._roles = runtime.roles
        self._health = runtime.lanes
        self._reminder_lanes = runtime.reminders.lanes
        self._poller_role: str | None = None
        self._retry_first = retry_first
        self.delivery = DeliveryOptions(edit_interval=edit_interval, group_edit_interval=group_edit_interval)
        self.native_drafts = native_drafts
        api = TelegramAPIServer.from_base(settings.api_base) if settings.api_base else PRODUCTION
        self.bot = Bot(settings.token.get_secret_value(), session=AiohttpSession(api=api))
        self._reminders: TelegramReminders | None = None
        self.albums = AlbumCollector(self._take_turn, album_delay)
        self.dispatcher = Dispatcher(name="chorus-telegram")
        self.dispatcher.update.outer_middleware(SkipSeenUpdates())
        self.dispatcher.include_router(
            build_router(
                self._take_turn,
                self.albums,
                AllowList(settings.allowed_users, settings.allowed_chats),
                on_unsupported=self._refuse_unsupported,
                on_stop=self._stop_generation,
                on_approval=partial(answer_approval, self.engine.approvals),
            )
        )
        self._me: User | None = None
        self._poller: UpdatePoller | None = None
        self._webhook_updates: set[asyncio.Task[None]] = set()

    @property
    def webhook_path(self) -> str:
        return urlsplit(self.settings.webhook_url or "").path or DEFAULT_WEBHOOK_PATH

    async def start(self) -> None:
        self._health.starting(LANE)
        try:
            self._me = await self.bot.me()
        except TelegramUnauthorizedError as error:
            raise ConfigError(
                "Telegram rejected the bot token; check CHORUS_TELEGRAM_TOKEN with @BotFather."
            ) from error
        await self.bot.set_my_commands(self._commands())
        # Reminders set in Telegram chats are sent by this process when they fall due.
        self._reminders = TelegramReminders(self.bot, self.delivery.budget)
        self._reminder_lanes.register(LANE, self._reminders)
        updates = self.dispatcher.resolve_used_update_types()
        if self.settings.mode == "webhook":
            if not (self.settings.webhook_url and self.settings.webhook_secret):
                raise ConfigError("Telegram webhook mode needs webhook_url and webhook_secret.")
            await self.bot.set_webhook(
                url=self.settings.webhook_url,
                secret_token=self.settings.webhook_secret.get_secret_value(),
                allowed_updates=updates,
            )
            self._health.running(LANE)
            return
        # Claimed before anything changes on Telegram: a refused second poller touches nothing.
        role = f"telegram-poller:{self._me.id}"
        if not await self._roles.claim(role):
            message = SECOND_POLLER.format(bot=self._me.username)
            self._health.failed(LANE, message)
            # A lane that fails to start is never stopped: close its HTTP session here.
            await self.bot.session.close()
            raise ConfigError(message)
        self._poller_role = role
        # A webhook left from an earlier deployment would make getUpdates fail.
        await self.bot.delete_webhook()
        self._poller = UpdatePoller(
            self.bot,
            self.dispatcher,
            updates,
            on_conflict=self._polling_conflict,
            on_down=lambda reason: self._health.down(LANE, reason),
            on_up=lambda: self._health.running(LANE),
            retry_first=self._retry_first,
        )
        self._poller.start()
        self._health.running(LANE)

    def _polling_conflict(self, reason: str) -> None:
        bot = self._me.username if self._me is not None else "this bot"
        message = POLLING_CONFLICT.format(reason=reason, bot=bot)
        log.error("The Telegram lane stopped. %s", message)
        self._health.failed(LANE, message)

    async def stop_intake(self) -> None:
        """Take no more updates; those taken are stored, then confirmed to Telegram."""
        if self._poller is not None:
            await self._poller.stop()

    async def drain(self, timeout: float) -> None:
        """Wait up to `timeout` for replies being delivered (a shutdown's last edits)."""
        running = list(self._webhook_updates)
        if self._poller is not None:
            await self._poller.wait_handlers(timeout)
        if running:
            await asyncio.wait(running, timeout=timeout)

    async def stop(self) -> None:
        if self._reminders is not None:
            self._reminder_lanes.unregister(LANE, self._reminders)
        await self.stop_intake()
        if self._poller is not None:
            await self._poller.wait_handlers(0)
            self._poller = None
        if self._poller_role is not None:
            await self._roles.release(self._poller_role)
            self._poller_role = None
        await self.albums.close()
        for task in list(self._webhook_updates):
            task.cancel()
        await asyncio.gather(*self._webhook_updates, return_exceptions=True)
        await self.bot.session.close()

    def mount(self, app: FastAPI) -> None:
        """In webhook mode, receive updates at the path of `webhook_url` in the web app."""
        if self.settings.mode == "webhook":
            app.add_api_route(
                self.webhook_path, self._receive_webhook, methods=["POST"], include_in_schema=False
            )

    async def _receive_webhook(self, request: Request) -> Response:
        secret = self.settings.webhook_secret
        given = request.headers.get(SECRET_HEADER, "")
        if secret is None or not hmac.compare_digest(given.encode(), secret.get_secret_value().encode()):
            return JSONResponse({"ok": False, "description": "wrong secret token"}, 401)
        try:
            update = Update.model_validate(await request.json(), context={"bot": self.bot})
        except (ValueError, ValidationError):
            return JSONResponse({"ok": False, "description": "not a Telegram update"}, 400)
        # Answer at once: Telegram re-sends updates whose request outlasts a long reply.
        task = asyncio.create_task(self._feed(update))
        self._webhook_updates.add(task)
        task.add_done_callback(self._webhook_updates.discard)
        return JSONResponse({"ok": True})

    async def _feed(self, update: Update) -> None:
        try:
            await self.dispatcher.feed_update(self.bot, update)
        except Exception:
            log.exception("Telegram update %s failed", update.update_id)

    async def _take_turn(self, messages: list[Message]) -> None:
        """Hand one message (or one album) to the engine and deliver what it answers."""
        try:
            me = self._me or await self.bot.me()
            inbound = replace(to_inbound(messages, self.bot, me), on_stored=partial(self._stored, messages))
            first = messages[0]
            if inbound.chat_kind == "group" and not self._should_answer(inbound, first, me):
                # A voice note that says the bot's name addresses it, like a mention.
                if not is_for_another_bot(first, me):
                    inbound = await self.engine.hear(inbound, bot_names(me))
                if not self._should_answer(inbound, first, me):
                    await self.engine.record(inbound)
                    return
            private = inbound.chat_kind == "private"
            target = ReplyTarget(
                chat_id=first.chat.id,
                thread_id=first.message_thread_id if inbound.thread_id else None,
                reply_to_message_id=None if private else first.message_id,
                # The message id is unique in the chat and never 0: a fresh draft per reply.
                draft_id=first.message_id if private and self.native_drafts else 0,
            )

            async def note_draft(draft_id: int) -> None:
                await self.engine.note_draft(inbound, str(draft_id))

            reply = await deliver_reply(
                self.bot, target, self.engine.stream(inbound), self.delivery, on_draft=note_draft
            )
            await self.engine.delivered(inbound)
            if reply is not None and reply.spoken_text:
                await send_spoken_reply(
                    self.bot, target, self.engine.speaking, reply.spoken_text, self.delivery.budget
                )
        finally:
            # Whatever happened, these updates need nothing more from Telegram.
            self._stored(messages)

    async def resume(self, delivery: Delivery, events: AsyncIterator[TurnEvent]) -> None:
        """Deliver a turn another process took (recovery), over the draft message it left."""
        private = delivery.chat_kind == "private"
        target = ReplyTarget(
            chat_id=int(delivery.chat_id),
            thread_id=int(delivery.thread_id) if delivery.thread_id else None,
            reply_to_message_id=None if private else int(delivery.platform_message_id),
            draft_id=int(delivery.platform_message_id) if private and self.native_drafts else 0,
        )
        await deliver_reply(
            self.bot,
            target,
            events,
            self.delivery,
            left_draft=int(delivery.draft_id) if delivery.draft_id else None,
        )

    def _stored(self, messages: list[Message]) -> None:
        if self._poller is not None:
            self._poller.stored(messages)

    async def _refuse_unsupported(self, message: Message) -> None:
        """A sticker, voice note, location…: a short answer in private, silence in groups unless addressed."""
        noun = unsupported_kind(message)
        me = self._me or await self.bot.me()
        if noun is None or (message.chat.type != "private" and not is_addressed(message, me)):
            return
        target = ReplyTarget(
            chat_id=message.chat.id,
            thread_id=message.message_thread_id if message.is_topic_message else None,
            reply_to_message_id=None if message.chat.type == "private" else message.message_id,
        )
        await send_text(self.bot, target, unsupported_reply(noun), self.delivery.budget)

    async def _stop_generation(self, event: MessageGenerationStopped) -> None:
        """The Stop button of a native draft: the same as sending /stop in that chat."""
        chat = event.chat
        inbound = InboundMessage(
            lane="telegram",
            platform_message_id=f"stop-{event.draft_id}",
            chat_id=str(chat.id),
            chat_kind="private",
            actor=Actor(
                user_id=str(chat.id),
                display_name=" ".join(filter(None, [chat.first_name, chat.last_name])) or str(chat.id),
                username=chat.username,
            ),
            text="/stop",
        )
        # The stopped reply itself shows the stop; the command's own answer is not sent.
        await self.engine.respond(inbound)

    def _should_answer(self, inbound: InboundMessage, first: Message, me: User) -> bool:
        if is_for_another_bot(first, me):
            return False
        return inbound.was_mentioned or self.settings.activation == "always"

    def _commands(self) -> list[BotCommand]:
        return [
            BotCommand(command=name, description=description[:256])
            for name, description in self.engine.commands.describe()
            if set(name) <= COMMAND_NAME_CHARS and len(name) <= 32
        ]
