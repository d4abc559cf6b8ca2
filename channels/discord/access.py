"""Operator allow-lists: which guilds, channels and users the bot talks to."""

from __future__ import annotations

import discord

from channels.discord.settings import DiscordSettings


class AccessPolicy:
    """An empty list allows everyone; guild and channel lists apply to guilds only, not DMs."""

    def __init__(self, settings: DiscordSettings) -> None:
        self._guilds = set(settings.allowed_guilds)
        self._channels = set(settings.allowed_channels)
        self._users = set(settings.allowed_users)

    def allows(self, user: discord.abc.User, guild: discord.Guild | None, channel: object) -> bool:
        if self._users and str(user.id) not in self._users:
            return False
        if guild is None:
            return True
        if self._guilds and str(guild.id) not in self._guilds:
            return False
        return not self._channels or bool(_channel_ids(channel) & self._channels)


def _channel_ids(channel: object) -> set[str]:
    # A thread is allowed when its parent channel is.
    ids = {str(getattr(channel, "id", ""))}
    parent_id = getattr(channel, "parent_id", None)
    if parent_id is not None:
        ids.add(str(parent_id))
    return ids
