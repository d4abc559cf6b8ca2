"""The discord.py client: gateway events and interactions in, engine turns out."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncGenerator
from typing import Any

import discord
from discord import app_commands
from discord.utils import MISSING

from bot.recovery import Delivery
from bot.turns.engine import TurnEngine
from bot.turns.events import TurnEvent
from channels.discord.access import AccessPolicy
from channels.discord.approvals import answer as answer_approval
from channels.discord.approvals import is_approval
from channels.discord.endpoints import Endpoints, RoutedHTTPClient
from channels.discord.replies import (
    MESSAGE_LIMIT,
    STOP_PREFIX,
    DiscordReply,
    deliver_reply,
    parse_draft_ref,
)
from channels.discord.settings import DiscordSettings
from channels.discord.slash import add_engine_commands
from channels.discord.translate import interaction_inbound, message_inbound
from channels.discord.voice import send_spoken_reply
from channels.discord.webhooks import PersonaWebhooks
from channels.text import split_message

log = logging.getLogger(__name__)

NOT_ALLOWED = "This bot is not available here."
# Joins, pins, thread notices and the like are Discord's system messages, not a person's.
PERSON_MESSAGE_TYPES = (discord.MessageType.default, discord.MessageType.reply)
# A bare mention of the bot asks for its attention: it answers with the persona's greeting.
BARE_MENTION_COMMAND = "/start"


def names_of(me: discord.ClientUser, guild: discord.Guild | None) -> tuple[str, ...]:
    """What people call the bot out loud: its name, display name and nickname in the server."""
    member = guild.me if guild is not None else None
    names = (me.name, me.display_name, member.display_name if member is not None else None)
    return tuple(dict.fromkeys(name for name in names if name))


def chorus_intents() -> discord.Intents:
    intents = discord.Intents.default()
    # Privileged: enable "Message Content Intent" for the bot in the Developer Portal.
    intents.message_content = True
    return intents


class ChorusClient(discord.Client):
    def __init__(
        self,
        engine: TurnEngine,
        settings: DiscordSettings,
        endpoints: Endpoints,
        *,
        edit_interval: float,
        **client_options: Any,
    ) -> None:
        # Model output must never ping @everyone, roles or people.
        super().__init__(
            intents=chorus_intents(), allowed_mentions=discord.AllowedMentions.none(), **client_options
        )
        self.http = RoutedHTTPClient(endpoints, self.loop)
        self._connection.http = self.http
        self.engine = engine
        self.activation = settings.activation
        self.access = AccessPolicy(settings)
        self.edit_interval = edit_interval
        self.webhooks = PersonaWebhooks(self)
        self.tree = app_commands.CommandTree(self)
        # Turns being answered, so a shutdown can let their last edits land.
        self.replying: set[asyncio.Task[object]] = set()

    async def setup_hook(self) -> None:
        # Each login runs this hook; a client that logs in again after a failed shard has them.
        if not self.tree.get_commands():
            add_engine_commands(self.tree, self.engine.commands.describe(), self.run_slash_command)
        try:
            await self.tree.sync()
        except discord.HTTPException:
            # Text commands still work; slash commands appear after the next successful sync.
            log.exception("could not register Discord slash commands")

    # Permission changes: a channel that refused a webhook may allow one now.

    async def on_guild_role_create(self, role: discord.Role) -> None:
        self.webhooks.retry_refused(role.guild.id)

    async def on_guild_role_update(self, before: discord.Role, after: discord.Role) -> None:
        if before.permissions != after.permissions:
            self.webhooks.retry_refused(after.guild.id)

    async def on_guild_role_delete(self, role: discord.Role) -> None:
        # A deleted role takes its channel overwrites (denies too) with it.
        self.webhooks.retry_refused(role.guild.id)

    async def on_guild_channel_update(
        self, before: discord.abc.GuildChannel, after: discord.abc.GuildChannel
    ) -> None:
        if before.overwrites != after.overwrites:
            self.webhooks.retry_refused(after.guild.id, after.id)

    async def on_member_update(self, before: discord.Member, after: discord.Member) -> None:
        if self.user is not None and after.id == self.user.id and before.roles != after.roles:
            self.webhooks.retry_refused(after.guild.id)

    async def on_message(self, message: discord.Message) -> None:
        # Bots and webhooks (this bot's personas included) never start a turn: no loops.
        if message.author.bot or message.webhook_id is not None:
            return
        if self.user is None or message.type not in PERSON_MESSAGE_TYPES:
            return
        if not self.access.allows(message.author, message.guild, message.channel):
            return
        inbound = message_inbound(message, self.user, self.application_id)
        if inbound.chat_kind == "group" and self.activation == "mention" and not inbound.was_mentioned:
            # A voice message that says the bot's name addresses it, like a mention.
            inbound = await self.engine.hear(inbound, names_of(self.user, message.guild))
            if not inbound.was_mentioned:
                await self.engine.record(inbound)
                return
        if inbound.was_mentioned and not inbound.text and not inbound.attachments:
            inbound = dataclasses.replace(inbound, text=BARE_MENTION_COMMAND)
        task = asyncio.current_task()
        assert task is not None
        self.replying.add(task)

        async def note_draft(draft: str) -> None:
            await self.engine.note_draft(inbound, draft)

        try:
            reply = await deliver_reply(
                message,
                self.engine.stream(inbound),
                personas=self.engine.personas,
                webhooks=self.webhooks,
                edit_interval=self.edit_interval,
                on_draft=note_draft,
            )
            await self.engine.delivered(inbound)
            if reply.reply is not None and reply.reply.spoken_text:
                await send_spoken_reply(reply, self.engine.speaking, reply.reply.spoken_text)
        finally:
            self.replying.discard(task)

    async def resume(self, delivery: Delivery, events: AsyncGenerator[TurnEvent, None]) -> None:
        """Deliver a turn a process that died left (recovery), over the draft it left if any."""
        channel_id = int(delivery.chat_id)
        channel = self.get_channel(channel_id) or await self.fetch_channel(channel_id)
        assert isinstance(channel, discord.abc.Messageable)
        reference = None
        if delivery.chat_kind == "group" and delivery.platform_message_id.isdigit():
            question = channel.get_partial_message(int(delivery.platform_message_id))
            reference = question.to_reference(fail_if_not_exists=False)
        reply = DiscordReply(
            channel,
            reference,
            personas=self.engine.personas,
            webhooks=self.webhooks,
            edit_interval=self.edit_interval,
            draft=await self._left_draft(channel, delivery.draft_id),
        )
        await reply.play(events)

    async def _left_draft(self, channel: discord.abc.Messageable, ref: str | None) -> discord.Message | None:
        """The draft a process that died left, to be edited; None if there is none or it is gone."""
        if ref is None:
            return None
        message_id, webhook_id = parse_draft_ref(ref)
        try:
            if webhook_id is None:
                return await channel.fetch_message(message_id)
            # A persona's draft is edited through the webhook that posted it.
            webhook = await self.webhooks.for_channel(channel)
            if webhook is None or webhook.id != webhook_id:
                log.warning(
                    "the draft %d was posted by a webhook that is gone; the reply goes out anew", message_id
                )
                return None
            thread = channel if isinstance(channel, discord.Thread) else MISSING
            return await webhook.fetch_message(message_id, thread=thread)
        except discord.NotFound:
            return None

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """A Stop button (its custom id names the session whose running turn it stops), or a
        tool call's Run or Deny button (it names the approval it answers)."""
        if interaction.type is not discord.InteractionType.component or interaction.data is None:
            return
        custom_id = str(interaction.data.get("custom_id", ""))
        if not custom_id.startswith(STOP_PREFIX) and not is_approval(custom_id):
            return
        if not self.access.allows(interaction.user, interaction.guild, interaction.channel):
            await interaction.response.send_message(NOT_ALLOWED, ephemeral=True)
            return
        if is_approval(custom_id):
            await answer_approval(self.engine.approvals, interaction, custom_id)
            return
        if self.engine.stop_turn(custom_id.removeprefix(STOP_PREFIX)):
            # The reply ends itself and its last edit takes the button away.
            await interaction.response.defer()
        else:
            # Nothing runs any more (a button left from before a restart): just remove it.
            await interaction.response.edit_message(view=None)

    async def run_slash_command(self, interaction: discord.Interaction, text: str) -> None:
        if not self.access.allows(interaction.user, interaction.guild, interaction.channel):
            await interaction.response.send_message(NOT_ALLOWED, ephemeral=True)
            return
        # Deferring first gives a slow turn 15 minutes instead of Discord's 3 seconds.
        await interaction.response.defer(thinking=True)
        reply = await self.engine.respond(interaction_inbound(interaction, text))
        if not reply.should_send:
            await interaction.delete_original_response()
            return
        for part in split_message(reply.text, MESSAGE_LIMIT):
            await interaction.followup.send(part)


class ShardedChorusClient(ChorusClient, discord.AutoShardedClient):
    """The same client over several gateway shards: `shard_ids` of `shard_count` in this process."""

    def __init__(
        self, engine: TurnEngine, settings: DiscordSettings, endpoints: Endpoints, *, edit_interval: float
    ) -> None:
        super().__init__(
            engine,
            settings,
            endpoints,
            edit_interval=edit_interval,
            shard_count=settings.shard_count,
            # None: every shard of shard_count in this process.
            shard_ids=settings.shard_ids or None,
        )

    def clear(self) -> None:
        """Re-open the client after a shard's failure closed it (`DiscordLane` reconnects so).

        Closing queued a `clean_close` that would end the next `connect` at once; the queue is
        discord.py's own (name-mangled), made anew as its setup hook does on the first login."""
        super().clear()
        self._AutoShardedClient__queue: asyncio.PriorityQueue[Any] = asyncio.PriorityQueue()


def make_client(
    engine: TurnEngine, settings: DiscordSettings, endpoints: Endpoints, *, edit_interval: float
) -> ChorusClient:
    """One gateway connection, or the configured shards of a sharded bot."""
    if settings.shard_count is None:
        return ChorusClient(engine, settings, endpoints, edit_interval=edit_interval)
    return ShardedChorusClient(engine, settings, endpoints, edit_interval=edit_interval)
