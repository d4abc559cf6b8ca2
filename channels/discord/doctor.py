"""`chorus doctor`'s line for Discord: the token logs in (`GET /users/@me`) where the lane would."""

from __future__ import annotations

import asyncio

import aiohttp
import discord

from bot.lanes import CHECK_SECONDS, Finding
from channels.discord.endpoints import Endpoints, RoutedHTTPClient
from channels.discord.settings import DiscordSettings

TOKEN_FIX = "set the bot's token (Developer Portal → Bot → Reset Token) in CHORUS_DISCORD_TOKEN"


async def check(settings: DiscordSettings) -> Finding:
    if settings.token is None:
        return Finding("ok", "off (no token)")
    http = RoutedHTTPClient(Endpoints(settings.api_base, settings.gateway_url), asyncio.get_running_loop())
    try:
        me = await asyncio.wait_for(http.static_login(settings.token.get_secret_value()), CHECK_SECONDS)
    except discord.LoginFailure:
        return Finding("fail", "the token was refused (401 Unauthorized)", TOKEN_FIX)
    except (discord.HTTPException, aiohttp.ClientError, TimeoutError, OSError) as error:
        return Finding(
            "fail",
            f"the API at {settings.api_base} did not answer ({str(error) or type(error).__name__})",
            "check the network, or channels.discord.api_base",
        )
    finally:
        await http.close()
    return Finding("ok", f"token accepted: {me['username']} (id {me['id']})")
