"""The discord.py client: gateway events and interactions in, engine turns out."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import discord
from discord import app_commands

from bot.turns.engine import Engine
from channels.discord.access import AccessPolicy
from channels.discord.endpoints import Endpoints, RoutedHTTPClient
from channels.discord.replies import MESSAGE_LIMIT, STOP_PREFIX, deliver_reply
from channels.discord.settings import DiscordSettings
from channels.discord.slash import add_engine_commands
from channels.discord.translate import interaction_inbound, message_inbound
from channels.discord.webhooks import PersonaWebhooks
from channels.text import split_message

log = logging.getLogger(__name__)

NOT_ALLOWED = "This bot is not available here."
# Joins, pins, thread notices and the like are Discord's system messages, not a person's.
PERSON_MESSAGE_TYPES = (discord.MessageType.default, discord.MessageType.reply)
# A bare mention of the bot asks for its attention: it answers with the persona's greeting.
BARE_MENTION_COMMAND = "/start"


def chorus_intents() -> discord.Intents:
    intents = discord.Intents.default()
    # Privileged: enable "Message Content Intent" for the bot in the Developer Portal.
    intents.message_content = True
    return intents


class ChorusClient(discord.Client):
    def __init__(
        self, engine: Engine, settings: DiscordSettings, endpoints: Endpoints, *, edit_interval: float
    ) -> None:
        # Model output must never ping @everyone, roles or people.
        super().__init__(intents=chorus_intents(), allowed_mentions=discord.AllowedMentions.none())
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
        add_engine_commands(self.tree, self.engine.commands.describe(), self.run_slash_command)
        try:
            await self.tree.sync()
        except discord.HTTPException:
            # Text commands still work; slash commands appear after the next successful sync.
            log.exception("could not register Discord slash commands")

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
            await self.engine.record(inbound)
            return
        if inbound.was_mentioned and not inbound.text and not inbound.attachments:
            inbound = dataclasses.replace(inbound, text=BARE_MENTION_COMMAND)
        task = asyncio.current_task()
        assert task is not None
        self.replying.add(task)
        try:
            await deliver_reply(
                message,
                self.engine.stream(inbound),
                personas=self.engine.personas,
                webhooks=self.webhooks,
                edit_interval=self.edit_interval,
            )
            await self.engine.delivered(inbound)
        finally:
            self.replying.discard(task)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """A Stop button: the custom id names the session whose running turn it stops."""
        if interaction.type is not discord.InteractionType.component or interaction.data is None:
            return
        custom_id = str(interaction.data.get("custom_id", ""))
        if not custom_id.startswith(STOP_PREFIX):
            return
        if not self.access.allows(interaction.user, interaction.guild, interaction.channel):
            await interaction.response.send_message(NOT_ALLOWED, ephemeral=True)
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
