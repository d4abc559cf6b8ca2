"""`chorus serve`: every configured lane in one process, around one engine."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

import uvicorn

from bot.app import build_runtime
from bot.config import Settings

log = logging.getLogger(__name__)


class Lane(Protocol):
    name: str

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def serve(settings: Settings) -> None:
    # Lanes are imported here, not at module level: `bot` holds no platform code.
    from channels.web import create_app

    runtime = build_runtime(settings)
    app = create_app(runtime)
    lanes: list[Lane] = []
    if settings.channels.telegram.token:
        from channels.telegram import TelegramLane

        telegram = TelegramLane(runtime)
        telegram.mount(app)
        lanes.append(telegram)
    if settings.channels.discord.token:
        from channels.discord import DiscordLane

        lanes.append(DiscordLane(runtime))
    web = settings.channels.web
    server = uvicorn.Server(
        # log_config=None: uvicorn's records go through Chorus's handler (text or JSON).
        uvicorn.Config(
            app, host=web.host, port=web.port, log_level=settings.log_level.lower(), log_config=None
        )
    )
    for lane in lanes:
        await lane.start()
        log.info("%s lane started", lane.name)
    log.info("web lane at http://%s:%d/", web.host, web.port)
    try:
        await server.serve()
    finally:
        for lane in reversed(lanes):
            await lane.stop()
        await runtime.aclose()
        await asyncio.sleep(0)
