"""`DiscordLane`: the Discord client's lifecycle inside `chorus serve`."""

from __future__ import annotations

import asyncio
import logging

import discord
from fastapi import FastAPI

from bot.errors import ConfigError
from bot.runtime import Runtime
from channels.discord.client import ChorusClient

log = logging.getLogger(__name__)

TOKEN_HELP = (
    "Check CHORUS_DISCORD_TOKEN (channels.discord.token): copy the bot token again from the Developer Portal."
)
INTENT_HELP = (
    "Discord refused the Message Content intent: enable it under Bot → Privileged Gateway "
    "Intents in the Developer Portal, then restart."
)


class DiscordLane:
    name = "discord"

    def __init__(self, runtime: Runtime, *, edit_interval: float = 1.0) -> None:
        settings = runtime.settings.channels.discord
        if settings.token is None:
            raise ConfigError("The Discord lane needs a bot token: set CHORUS_DISCORD_TOKEN.")
        self._token = settings.token.get_secret_value()
        self.client = ChorusClient(runtime.engine, settings, edit_interval=edit_interval)
        self._gateway: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Log in (a wrong token fails here, at startup), then keep the gateway in the background."""
        try:
            await self.client.login(self._token)
        except discord.LoginFailure as error:
            await self.client.close()
            raise ConfigError(f"Discord rejected the bot token. {TOKEN_HELP}") from error
        self._gateway = asyncio.create_task(self.client.connect(), name="discord-gateway")
        self._gateway.add_done_callback(_report_gateway_end)

    def mount(self, app: FastAPI) -> None:
        """The Discord lane talks over the gateway only: no routes on the web app."""

    async def stop(self) -> None:
        await self.client.close()
        if self._gateway is not None:
            await asyncio.gather(self._gateway, return_exceptions=True)
            self._gateway = None


def _report_gateway_end(task: asyncio.Task[None]) -> None:
    if task.cancelled() or task.exception() is None:
        return
    error = task.exception()
    if isinstance(error, discord.PrivilegedIntentsRequired):
        log.error(INTENT_HELP)
    else:
        log.error("the Discord gateway connection ended: %s", error, exc_info=error)
