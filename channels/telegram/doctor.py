"""`chorus doctor`'s line for Telegram: the token is accepted (`getMe`) where the lane would connect."""

from __future__ import annotations

import asyncio

from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import PRODUCTION, TelegramAPIServer
from aiogram.exceptions import TelegramAPIError, TelegramUnauthorizedError
from aiogram.utils.token import TokenValidationError

from bot.lanes import CHECK_SECONDS, Finding
from channels.telegram.settings import TelegramSettings

TOKEN_FIX = "set the token @BotFather gave the bot in CHORUS_TELEGRAM_TOKEN"


async def check(settings: TelegramSettings) -> Finding:
    if settings.token is None:
        return Finding("ok", "off (no token)")
    api = TelegramAPIServer.from_base(settings.api_base) if settings.api_base else PRODUCTION
    try:
        bot = Bot(settings.token.get_secret_value(), session=AiohttpSession(api=api))
    except TokenValidationError:
        return Finding("fail", "the token is not a bot token (it looks like 123456:ABC…)", TOKEN_FIX)
    try:
        me = await asyncio.wait_for(bot.get_me(), CHECK_SECONDS)
    except TelegramUnauthorizedError:
        return Finding("fail", "the token was refused (401 Unauthorized)", TOKEN_FIX)
    except (TelegramAPIError, TimeoutError, OSError) as error:
        where = settings.api_base or "api.telegram.org"
        return Finding(
            "fail",
            f"the Bot API at {where} did not answer getMe ({_reason(error)})",
            "check the network, or channels.telegram.api_base",
        )
    finally:
        await bot.session.close()
    return Finding("ok", f"token accepted: @{me.username} (id {me.id}), {settings.mode}")


def _reason(error: BaseException) -> str:
    return str(error) or type(error).__name__
