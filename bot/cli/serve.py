"""`chorus serve`: every active lane in one process, around one engine and one web app.

The process owns its end: SIGTERM and SIGINT start a drain (no new work, running
turns get `shutdown_grace_seconds` to finish), then whatever still runs is cut —
stored as interrupted, its visible draft turned into the stored text plus a
cut-off notice — lanes close properly and the memory flush runs. uvicorn's own
signal handling is switched off, since it re-raises the signal after its
shutdown and the process would die before any of this ran.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import uvicorn
from sqlalchemy.engine import make_url

from bot.config import Settings
from bot.errors import ConfigError
from bot.heap import freeze_startup_objects
from bot.lanes import LaneRunner, active_lanes
from bot.liveness import Liveness
from bot.loop_lag import LoopLagProbe
from bot.recovery import Delivery, Recovery, ResumableLane
from bot.runtime import Runtime, build_runtime
from channels.web.app import create_host_app

log = logging.getLogger(__name__)

# How long cut turns get to show their final text (one edit or SSE event each).
CUT_DELIVERY_SECONDS = 10.0
# uvicorn's wait for open connections (streams of cut turns) before it cancels them.
HTTP_CLOSE_SECONDS = 5


class Server(uvicorn.Server):
    """uvicorn without its signal handlers: `Service` decides when it stops."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Service:
    """The lanes of one `chorus serve` process and the order they start and end in."""

    def __init__(
        self,
        runtime: Runtime,
        lanes: list[LaneRunner],
        server: uvicorn.Server,
        resumable: dict[str, ResumableLane] | None = None,
    ) -> None:
        self.runtime = runtime
        self.lanes = lanes
        self.server = server
        self.liveness = Liveness(runtime.database, runtime.engine.instance_id)
        if resumable is None:
            resumable = {lane.name: lane for lane in lanes if isinstance(lane, ResumableLane)}
        self.recovery = Recovery(runtime.engine, self.liveness, resumable)
        self._stop = asyncio.Event()
        self.loop_lag = LoopLagProbe()

    def request_stop(self) -> None:
        if not self._stop.is_set():
            log.info("shutting down: %d turns running", len(self.runtime.engine.running))
        self._stop.set()

    async def _recover(self, claimed: list[Delivery]) -> None:
        # A recovered turn goes on with the tools the dead process had: a call it left
        # (one waiting for approval, say) would otherwise find its MCP tool unknown.
        await self.runtime.mcp_servers.settled()
        await self.recovery.run(claimed)

    async def run(self) -> None:
        started: list[LaneRunner] = []
        # A second process on one SQLite file is refused here, before it touches anything.
        self.liveness.start()
        # Before the probe starts: this one full collection is start-up, not a stall.
        freeze_startup_objects()
        self.loop_lag.start()
        # Jobs a process that died was running (SQLite) run again, and those waiting run now;
        # jobs that need one of this process's lanes (reminders) run here even without
        # `jobs.worker` (PostgreSQL).
        await self.runtime.jobs.start(self.liveness.is_dead, lanes=[lane.name for lane in self.lanes])
        # MCP servers connect in the background: the lanes start meanwhile, not after them.
        self.runtime.mcp_servers.start()
        recovering: asyncio.Task[None] | None = None
        try:
            # Claimed before any lane takes a message: a platform re-sending one of
            # these messages then finds it claimed instead of answering it twice.
            claimed = self.recovery.claim()
            for lane in self.lanes:
                await lane.start()
                started.append(lane)
                log.info("%s lane started", lane.name)
            web = self.runtime.settings.channels.web
            log.info("web lane at http://%s:%d/", web.host, web.port)
            recovering = asyncio.create_task(self._recover(claimed), name="recovery")
            if self.runtime.memory is not None:
                # Rows stored before dense recall was installed get their vectors meanwhile.
                self.runtime.memory.start_backfill()
            http = asyncio.create_task(self.server.serve(), name="http")
            stop = asyncio.create_task(self._stop.wait())
            await asyncio.wait({http, stop}, return_when=asyncio.FIRST_COMPLETED)
            recovering.cancel()
            await self.drain(started)
            self.server.should_exit = True
            await http
            stop.cancel()
        finally:
            if recovering is not None:
                recovering.cancel()
            for lane in reversed(started):
                await lane.stop()
            await self.runtime.aclose()
            self.liveness.close()
            await self.loop_lag.stop()
            log.info(self.loop_lag.summary())

    async def drain(self, lanes: list[LaneRunner]) -> None:
        """No new work; running turns finish within the grace, the rest are cut."""
        engine = self.runtime.engine
        engine.running.closing = True
        for lane in lanes:
            stop_intake = getattr(lane, "stop_intake", None)
            if stop_intake is not None:
                await stop_intake()
        grace = self.runtime.settings.shutdown_grace_seconds
        if not await engine.running.wait_idle(grace):
            cut = engine.running.cut_all()
            log.warning("%d turns still running after %.0f s: cut", cut, grace)
            await engine.running.wait_idle(CUT_DELIVERY_SECONDS)
        # Cut turns end in the engine first; lanes then still edit their drafts.
        await self.recovery.wait(CUT_DELIVERY_SECONDS)
        for lane in lanes:
            drain = getattr(lane, "drain", None)
            if drain is not None:
                await drain(CUT_DELIVERY_SECONDS)


def build_service(settings: Settings) -> Service:
    if not settings.jobs.worker and make_url(settings.database_url).get_backend_name() != "postgresql":
        raise ConfigError(
            "jobs.worker: false needs PostgreSQL, where `chorus worker` runs the jobs; "
            "on SQLite `chorus serve` must run them."
        )
    runtime = build_runtime(settings)
    app = create_host_app(runtime)
    lanes: list[LaneRunner] = [spec.build(runtime) for spec in active_lanes(settings.channels)]
    for lane in lanes:
        lane.mount(app)
    web = settings.channels.web
    server = Server(
        # log_config=None: uvicorn's records go through Chorus's handler (text or JSON).
        uvicorn.Config(
            app,
            host=web.host,
            port=web.port,
            log_level=settings.log_level.lower(),
            log_config=None,
            timeout_graceful_shutdown=HTTP_CLOSE_SECONDS,
        )
    )
    return Service(runtime, lanes, server)


async def serve(settings: Settings) -> None:
    service = build_service(settings)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, service.request_stop)
    try:
        await service.run()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            with suppress(ValueError):
                loop.remove_signal_handler(signum)
