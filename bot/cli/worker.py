"""`chorus worker`: a process that runs only after-turn jobs, on PostgreSQL.

It takes jobs from every `chorus serve` process on the database (procrastinate's
queue), one session's jobs never at once, until SIGTERM or SIGINT; then the jobs
it is running finish, the memory of the sessions it offloaded is flushed, and it
exits 0. On SQLite `chorus serve` runs the jobs itself.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from contextlib import suppress

from sqlalchemy.engine import make_url

from bot.config import Settings
from bot.errors import ConfigError

log = logging.getLogger(__name__)


async def work(settings: Settings) -> None:
    if make_url(settings.database_url).get_backend_name() != "postgresql":
        raise ConfigError(
            "`chorus worker` needs PostgreSQL (database_url); on SQLite `chorus serve` runs the jobs itself."
        )
    from bot.jobs.postgres import QUEUE, ProcrastinateJobs
    from bot.runtime import build_runtime

    runtime = build_runtime(settings)
    queue = runtime.jobs
    assert isinstance(queue, ProcrastinateJobs)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    # The shared queue only: a lane's own queue is for the processes that run the lane.
    worker = asyncio.create_task(queue.run_worker([QUEUE]), name="jobs")
    stopping = asyncio.create_task(stop.wait())
    log.info("job worker started (concurrency %d)", settings.jobs.concurrency)
    try:
        await asyncio.wait({worker, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if worker.done():
            # The worker ended on its own (a lost database): say why, and exit non-zero.
            worker.result()
        log.info("job worker stopping: running jobs finish")
        queue.stop_worker()
        await worker
    finally:
        stopping.cancel()
        await runtime.aclose()
        for signum in (signal.SIGTERM, signal.SIGINT):
            with suppress(ValueError):
                loop.remove_signal_handler(signum)
