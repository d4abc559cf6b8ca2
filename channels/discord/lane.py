"""`DiscordLane`: the Discord client's lifecycle inside `chorus serve`.

Startup never blocks the other lanes on Discord: when Discord is unreachable or answers
5xx, the lane keeps retrying with backoff in the background (and says so in the log)
while the web lane serves. A rejected token at startup stops `chorus serve` with advice;
a fatal gateway close later (4004 token reset, 4014 intent not enabled) marks the lane
failed in /healthz and tells the operator the fix. A connection that ends any other way
(an event discord.py cannot parse raises out of its gateway loop) is logged with its
traceback, shown down in /healthz, and made again with backoff: the lane keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator

import aiohttp
import discord
from discord.utils import MISSING
from fastapi import FastAPI

from bot.errors import ConfigError
from bot.recovery import Delivery
from bot.runtime import Runtime
from bot.turns.events import TurnEvent
from channels.discord.client import make_client
from channels.discord.endpoints import Endpoints, route_webhooks_in_this_task
from channels.discord.reminders import DiscordReminders
from channels.reconnect import Backoff

log = logging.getLogger(__name__)

LANE = "discord"
TOKEN_HELP = (
    "Check CHORUS_DISCORD_TOKEN (channels.discord.token): copy the bot token again from the Developer Portal."
)
INTENT_HELP = (
    "Discord refused the Message Content intent: enable it under Bot → Privileged Gateway "
    "Intents in the Developer Portal, then restart."
)
# Failures worth retrying: Discord (or the way to it) is down, not our configuration.
UNREACHABLE = (OSError, aiohttp.ClientError, asyncio.TimeoutError, discord.DiscordServerError)
RETRY_FIRST = 2.0
FIRST_LOGIN_TIMEOUT = 10.0
RETRY_MAX = 120.0


class DiscordLane:
    name = LANE

    def __init__(
        self,
        runtime: Runtime,
        *,
        edit_interval: float = 1.0,
        retry_first: float = RETRY_FIRST,
        first_login_timeout: float = FIRST_LOGIN_TIMEOUT,
    ) -> None:
        settings = runtime.settings.channels.discord
        if settings.token is None:
            raise ConfigError("The Discord lane needs a bot token: set CHORUS_DISCORD_TOKEN.")
        self._token = settings.token.get_secret_value()
        self._endpoints = Endpoints(settings.api_base, settings.gateway_url)
        self._shards = (settings.shard_count, settings.shard_ids) if settings.shard_count else None
        self._health = runtime.lanes
        self._backoff = Backoff(retry_first, RETRY_MAX)
        self._first_login_timeout = first_login_timeout
        self.client = make_client(runtime.engine, settings, self._endpoints, edit_interval=edit_interval)
        self.client.event(self.on_ready)
        self._reminder_lanes = runtime.reminders.lanes
        self._reminders = DiscordReminders(self.client, self._endpoints)
        self._gateway: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def on_ready(self) -> None:
        self._ready.set()
        self._backoff.connected()
        self._health.running(LANE)

    async def resume(self, delivery: Delivery, events: AsyncGenerator[TurnEvent, None]) -> None:
        """Finish a turn a process that died left: once connected, over the draft it left."""
        await self._ready.wait()
        # Recovery runs in a task of its own, not one the gateway started: route its webhook calls too.
        route_webhooks_in_this_task(self._endpoints)
        await self.client.resume(delivery, events)

    async def start(self) -> None:
        """Log in (a wrong token fails here, at startup), then keep the gateway in the background."""
        self._health.starting(LANE)
        if self._shards is not None:
            count, ids = self._shards
            # Which servers this process hears depends on it: say so once, at start.
            log.info("Discord shards %s of %d in this process", ids or "all", count)
        try:
            # A Discord that does not answer must not hold up the other lanes' start.
            await asyncio.wait_for(self.client.login(self._token), self._first_login_timeout)
            login_in = None
        except discord.LoginFailure as error:
            self._health.failed(LANE, f"Discord rejected the bot token. {TOKEN_HELP}")
            await self.client.close()
            raise ConfigError(f"Discord rejected the bot token. {TOKEN_HELP}") from error
        except UNREACHABLE as error:
            login_in = self._backoff.next()
            self._unreachable(error, login_in)
        self._gateway = asyncio.create_task(self._run(login_in), name="discord-gateway")
        # Reminders set in Discord channels, threads and DMs are posted by this process.
        self._reminder_lanes.register(LANE, self._reminders)

    def mount(self, app: FastAPI) -> None:
        """The Discord lane talks over the gateway only: no routes on the web app."""

    async def drain(self, timeout: float) -> None:
        """Wait up to `timeout` for replies being delivered (a shutdown's last edits)."""
        if self.client.replying:
            await asyncio.wait(list(self.client.replying), timeout=timeout)

    async def stop(self) -> None:
        self._reminder_lanes.unregister(LANE, self._reminders)
        # The gateway task goes first: it may be waiting to retry a login, and while its
        # reader still waits on the socket, aiohttp hands it the close and discord.py answers
        # 4000 (resume later) instead of 1000.
        if self._gateway is not None:
            self._gateway.cancel()
            await asyncio.gather(self._gateway, return_exceptions=True)
            self._gateway = None
        await self.client.close()

    async def _run(self, login_in: float | None) -> None:
        """Log in after `login_in` seconds (None: logged in already), then keep the gateway up."""
        route_webhooks_in_this_task(self._endpoints)
        if login_in is not None and not await self._login_with_retries(login_in):
            return
        while True:
            try:
                await self.client.connect()
                return  # the client was closed: the lane is stopping
            except discord.PrivilegedIntentsRequired:
                self._fail(INTENT_HELP)
                return
            except discord.ConnectionClosed as error:
                # discord.py raises only the closes no reconnect can fix (and closes the client).
                if error.code == 4004:
                    self._fail(f"Discord closed the gateway: authentication failed (4004). {TOKEN_HELP}")
                else:
                    self._fail(
                        f"Discord closed the gateway with code {error.code}: {error.reason or 'no reason'}."
                    )
                return
            except Exception as error:
                delay = self._backoff.next()
                self._connection_failed(error, delay, "The Discord gateway connection failed")
            if not await self._reconnect(delay):
                return

    async def _reconnect(self, delay: float) -> bool:
        """After a failed connection: drop what is left of it, wait `delay`, connect afresh."""
        if self.client.is_closed():
            # A sharded client closes itself (and its HTTP session) when a shard fails.
            self.client.clear()
            return await self._login_with_retries(delay)
        # The socket is still open under the event that broke its loop: close it; the REST
        # session stays, so replies being delivered go on. The next connect identifies anew.
        ws = self.client.ws
        if ws is not None:
            await ws.close(code=4000)
        await asyncio.sleep(delay)
        return not self.client.is_closed()

    async def _login_with_retries(self, delay: float) -> bool:
        """Log in after `delay`; while Discord is unreachable, again with backoff."""
        while not self.client.is_closed():
            await asyncio.sleep(delay)
            # A failed attempt leaves its HTTP session (and connector) open; the next opens new ones.
            await self.client.http.close()
            self.client.http.connector = MISSING
            try:
                await self.client.login(self._token)
            except discord.LoginFailure:
                self._fail(f"Discord rejected the bot token. {TOKEN_HELP}")
                return False
            except UNREACHABLE as error:
                delay = self._backoff.next()
                self._unreachable(error, delay)
                continue
            except Exception as error:
                delay = self._backoff.next()
                self._connection_failed(error, delay, "Logging in to Discord failed")
                continue
            log.info("Discord is reachable again; the Discord lane is connecting")
            return True
        return False

    def _connection_failed(self, error: Exception, retry_in: float, what: str) -> None:
        reason = f"{what} ({type(error).__name__}: {error}); reconnecting in {retry_in:.0f} s"
        log.error("%s. The other lanes keep serving.", reason, exc_info=error)
        self._health.down(LANE, reason)

    def _unreachable(self, error: BaseException, retry_in: float) -> None:
        reason = f"Discord is unreachable ({type(error).__name__}: {error}); retrying in {retry_in:.0f} s"
        log.warning("%s. The other lanes keep serving.", reason)
        self._health.starting(LANE, reason)

    def _fail(self, reason: str) -> None:
        log.error("The Discord lane stopped. %s", reason)
        self._health.failed(LANE, reason)
