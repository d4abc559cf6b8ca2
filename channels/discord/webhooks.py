"""Persona webhooks: in server channels each persona posts under its own name and avatar.

The bot creates one webhook per channel (threads post through their parent's webhook)
and reuses it; a webhook can post under any name and avatar. Creating or listing
webhooks needs the Manage Webhooks permission; without it replies fall back to a bold
name header, and the operator is told once. A channel that refused is asked again as soon as
an admin changes the server's roles, the bot's roles or the channel's permissions.
"""

from __future__ import annotations

import asyncio
import logging
import time

import discord

log = logging.getLogger(__name__)

WEBHOOK_NAME = "Chorus personas"
# A channel that refused is asked again at once when the server's roles or the channel's
# permissions change (`retry_refused`), and otherwise after this long.
RETRY_REFUSED_AFTER = 600.0
MANAGE_WEBHOOKS_HELP = (
    "Discord refused to create a webhook (the bot lacks the Manage Webhooks permission), so "
    "personas are shown as a bold name header instead of their own name and avatar. Grant the "
    "bot's role Manage Webhooks to fix it."
)


class PersonaWebhooks:
    def __init__(self, client: discord.Client) -> None:
        self._client = client
        self._webhooks: dict[int, discord.Webhook] = {}
        # Channel id → (its server's id, when it refused).
        self._refused: dict[int, tuple[int, float]] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._told_operator = False

    async def for_channel(self, channel: object) -> discord.Webhook | None:
        """The bot's webhook for a server channel or thread; None where none can be had."""
        parent = channel.parent if isinstance(channel, discord.Thread) else channel
        if not isinstance(parent, discord.TextChannel | discord.ForumChannel):
            return None
        if parent.id in self._webhooks:
            return self._webhooks[parent.id]
        refused = self._refused.get(parent.id)
        if refused is not None and time.monotonic() - refused[1] < RETRY_REFUSED_AFTER:
            return None
        async with self._locks.setdefault(parent.id, asyncio.Lock()):
            if parent.id not in self._webhooks:
                try:
                    self._webhooks[parent.id] = await self._find_or_create(parent)
                except discord.Forbidden:
                    self._refused[parent.id] = (parent.guild.id, time.monotonic())
                    if not self._told_operator:
                        self._told_operator = True
                        log.warning(MANAGE_WEBHOOKS_HELP)
                    return None
        return self._webhooks[parent.id]

    def retry_refused(self, guild_id: int, channel_id: int | None = None) -> None:
        """Permissions changed in a server (or one channel of it): the next reply asks again."""
        for refused_id, (refused_guild, _) in list(self._refused.items()):
            if refused_guild == guild_id and channel_id in (None, refused_id):
                del self._refused[refused_id]

    def forget(self, webhook: discord.Webhook) -> None:
        """The webhook was deleted (by an admin): the next reply creates a new one."""
        for channel_id, known in list(self._webhooks.items()):
            if known.id == webhook.id:
                del self._webhooks[channel_id]

    async def _find_or_create(self, channel: discord.TextChannel | discord.ForumChannel) -> discord.Webhook:
        me = self._client.user
        for webhook in await channel.webhooks():
            # Only a webhook this bot created comes with a token it may post with.
            if me is not None and webhook.user is not None and webhook.user.id == me.id and webhook.token:
                return webhook
        return await channel.create_webhook(name=WEBHOOK_NAME, reason="Chorus personas speak through it")
