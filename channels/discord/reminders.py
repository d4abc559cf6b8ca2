"""Reminders on Discord: posted in the channel, thread or DM they were set in.

In a server the persona that set it speaks through its webhook, as its replies do; in
a DM the bot posts it. discord.py waits out 429s itself; a channel that is gone or a
user who no longer takes the bot's DMs is not tried again.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import discord

from bot.errors import DeliveryRefused
from bot.reminders.delivery import ReminderDelivery
from bot.turns.events import Reply, TurnEvent
from channels.discord.client import ChorusClient
from channels.discord.endpoints import Endpoints, route_webhooks_in_this_task
from channels.discord.replies import DiscordReply


class DiscordReminders:
    """The Discord lane's `ReminderLane`."""

    def __init__(self, client: ChorusClient, endpoints: Endpoints) -> None:
        self.client = client
        self.endpoints = endpoints

    async def deliver(self, delivery: ReminderDelivery) -> str | None:
        client = self.client
        # A job's task, not one the gateway started: its webhook calls are routed here.
        route_webhooks_in_this_task(self.endpoints)
        channel_id = int(delivery.address.chat_id)
        try:
            channel = client.get_channel(channel_id) or await client.fetch_channel(channel_id)
            if not isinstance(channel, discord.abc.Messageable):
                raise DeliveryRefused(f"channel {channel_id} takes no messages", permanent=True)
            reply = DiscordReply(
                channel,
                None,
                personas=client.engine.personas,
                webhooks=client.webhooks,
                edit_interval=client.edit_interval,
                in_guild=delivery.address.chat_kind == "group",
            )
            await reply.play(_as_reply(delivery))
        except (discord.Forbidden, discord.NotFound) as error:
            raise DeliveryRefused(error.text or str(error), permanent=True) from error
        except discord.HTTPException as error:
            raise DeliveryRefused(error.text or str(error)) from error
        return reply.first_message_id


async def _as_reply(delivery: ReminderDelivery) -> AsyncGenerator[TurnEvent, None]:
    yield Reply(
        "assistant",
        delivery.text,
        session_id=delivery.session_id,
        persona_id=delivery.persona.id,
        persona_name=delivery.persona.name,
    )
