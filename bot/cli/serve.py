"""`chorus serve`: every active lane in one process, around one engine and one web app."""

from __future__ import annotations

import asyncio
import logging

import uvicorn

from bot.config import Settings
from bot.runtime import build_runtime

log = logging.getLogger(__name__)


async def serve(settings: Settings) -> None:
    # Lanes are imported here, not at module level: `bot` holds no platform code,
    # and the registry imports a lane's platform library only when it is built.
    from channels.registry import LaneRunner, active_lanes
    from channels.web.app import create_host_app

    runtime = build_runtime(settings)
    app = create_host_app(runtime)
    lanes: list[LaneRunner] = [spec.build(runtime) for spec in active_lanes(settings.channels)]
    for lane in lanes:
        lane.mount(app)
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
