"""The after-turn jobs on procrastinate, for PostgreSQL.

Deferring happens on the connection of the transaction that stores the reply
(procrastinate's external-connection defer), so a job exists exactly when its
reply does: a turn that fails to store its reply enqueues nothing. Each job is
deferred with `lock=<session id>`, so procrastinate never runs two jobs of one
session at once whichever worker takes them, and with a queueing lock per job
and session, so a job already waiting covers a new request (it reads the session
when it runs). A timer (the idle memory flush) is a small job scheduled without
a lock — a future job holding the session's lock would hold back every other job
of the session — which defers the real job, locked, when it fires. One timer
per job and session waits at a time (a queueing lock): a timer that finds a
newer message when it fires waits again, `delay` after that message.

Workers run in `chorus serve` (`jobs.worker`) or in `chorus worker` processes. A job
that needs a lane (a reminder, which its lane shows) goes to that lane's own queue, which
only processes running the lane take: every `chorus serve` takes the queues of the lanes it
runs (even with `jobs.worker: false`), `chorus worker` runs no lane and takes none of them.
A worker killed mid-job leaves its job `doing`; every worker retries the jobs of
workers whose heartbeat stopped more than `jobs.stalled_seconds` ago, so the job
runs again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import timedelta
from typing import Any

from procrastinate import App, PsycopgConnector, RetryStrategy, SyncPsycopgConnector
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.worker import Worker
from sqlalchemy.engine import Connection, make_url

from bot.config import JobSettings
from bot.jobs.definitions import SHUTDOWN_SECONDS, JobDefinitions, JobFunction
from bot.storage.boundary import boundary_for
from bot.storage.jobs import JobRequest, procrastinate_jobs_count
from bot.storage.messages import MessageStore
from bot.storage.models import utcnow

log = logging.getLogger(__name__)

QUEUE = "chorus"
TIMER_TASK = "chorus.timer"
# How often `drain` looks at the queue; it waits on other processes' workers too.
DRAIN_POLL_SECONDS = 0.05
# Connections the worker's pool may open beyond one per concurrent job.
POOL_SPARE = 2


def task_name(job: str) -> str:
    return f"chorus.{job}"


def lane_queue(lane: str) -> str:
    """The queue of the jobs only a process running `lane` may run."""
    return f"{QUEUE}.lane.{lane}"


def queue_for(lane: str | None) -> str:
    return lane_queue(lane) if lane is not None else QUEUE


class ProcrastinateSink:
    """The job sink of the message store on PostgreSQL: defers on the caller's transaction.

    It needs nothing of the queue that runs the jobs, so the stores are built with it
    before the queue (which reads the stores) exists.
    """

    def __init__(self) -> None:
        # Never opened: it only defers, on the connection of the caller's transaction.
        self._deferrer = App(connector=SyncPsycopgConnector())

    def enqueue(self, connection: Connection, requests: Sequence[JobRequest]) -> None:
        driver = connection.connection.driver_connection
        for request in requests:
            queue = QUEUE
            if request.is_timer:
                # Any worker may fire a timer; the job it defers goes to the lane's queue.
                task = TIMER_TASK
                options: dict[str, Any] = {"schedule_at": request.run_after}
                arguments: dict[str, Any] = {"job": request.name, "delay": request.delay_seconds}
                if request.lane is not None:
                    arguments["lane"] = request.lane
                waiting = queueing_lock(TIMER_TASK, request.name, request.session_id)
            else:
                task, options, arguments = task_name(request.name), {"lock": request.session_id}, {}
                queue = queue_for(request.lane)
                waiting = queueing_lock(request.name, request.session_id)
            try:
                # A refused defer (the job already waits) must not abort the reply's transaction.
                with connection.begin_nested():
                    self._deferrer.configure_task(
                        task, queue=queue, queueing_lock=waiting, connection=driver, **options
                    ).defer(session_id=request.session_id, seq=request.seq, **arguments)
            except AlreadyEnqueued:
                pass


class ProcrastinateJobs:
    """The `JobQueue` of the process on procrastinate: its worker runs the jobs any process deferred."""

    def __init__(
        self,
        messages: MessageStore,
        database_url: str,
        definitions: JobDefinitions,
        settings: JobSettings,
        running_lanes: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        self.messages = messages
        database = self.database = messages.database
        self.db = boundary_for(database)
        self.definitions = definitions
        self.settings = settings
        conninfo = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
        self.app = App(
            connector=PsycopgConnector(
                conninfo=conninfo, min_size=1, max_size=settings.concurrency + POOL_SPARE
            )
        )
        retry = RetryStrategy(max_attempts=settings.max_attempts, exponential_wait=2)
        for name in definitions.names:
            self.app.task(name=task_name(name), queue=QUEUE, retry=retry)(self._task(name))
        self.app.task(name=TIMER_TASK, queue=QUEUE, retry=retry)(self._fire_timer)
        self._worker: asyncio.Task[None] | None = None
        # The lanes this process runs (those registered when its worker starts, and those
        # `start` names before they are): its worker also takes their queues.
        self.running_lanes = running_lanes
        self.lanes: tuple[str, ...] = ()
        self._closed = False
        # The state of the running worker, for `stop_worker`.
        self._stop_requested = False
        self._opening: asyncio.Future[Any] | None = None
        self._running: Worker | None = None

    # --- JobQueue ------------------------------------------------------------------

    def queues(self) -> list[str]:
        """The queues this process's worker takes: the shared one (`jobs.worker`), its lanes' own."""
        lanes = dict.fromkeys((*self.lanes, *self.running_lanes()))
        return ([QUEUE] if self.settings.worker else []) + [lane_queue(lane) for lane in lanes]

    def wake(self) -> None:
        # Workers hear of new jobs from PostgreSQL (LISTEN/NOTIFY at commit); this
        # only makes sure this process runs one when it should.
        if self.queues() and not self._closed and self._worker is None:
            self._start_worker()

    async def start(self, is_dead: Callable[[str], bool] | None = None, lanes: Sequence[str] = ()) -> None:
        # Dead workers are found by procrastinate's heartbeats, not by `is_dead`.
        self._closed = False
        self.lanes = tuple(lanes)
        if self._worker is None and self.queues():
            self._start_worker()

    def _start_worker(self) -> None:
        self._stop_requested = False
        self._worker = asyncio.create_task(self.run_worker(), name="jobs")
        self._worker.add_done_callback(_report_end)

    async def drain(self) -> None:
        queues = self.queues()
        if self._worker is None and not queues:
            return
        self.wake()
        while await self.db.run(procrastinate_jobs_count, self.database, queues, due_by=utcnow()) > 0:
            await asyncio.sleep(DRAIN_POLL_SECONDS)

    def pending(self) -> int:
        # The shared queue's backlog counts whether or not this process works on it.
        queues = dict.fromkeys((QUEUE, *self.queues()))
        return procrastinate_jobs_count(self.database, list(queues), due_by=utcnow())

    async def aclose(self) -> None:
        self._closed = True
        worker, self._worker = self._worker, None
        if worker is not None:
            self.stop_worker()
            done, _ = await asyncio.wait({worker}, timeout=SHUTDOWN_SECONDS)
            if not done:
                log.warning("jobs still running after %.0f s are left to run again", SHUTDOWN_SECONDS)

    # --- the worker ----------------------------------------------------------------

    def stop_worker(self) -> None:
        """Ask the worker to stop: it takes no new job and lets the running ones finish.

        A request the worker checks, not a cancel: psycopg_pool can lose a cancel that
        lands while a task waits for a pool connection, which the worker's start does,
        and a worker that missed it would run on and keep its pool open for good.
        """
        self._stop_requested = True
        if self._opening is not None:
            # Losing this cancel is harmless: the opening then just completes, and
            # the worker sees the request right after.
            self._opening.cancel()
        if self._running is not None:
            self._running.stop()  # type: ignore[no-untyped-call]

    async def run_worker(self, queues: Sequence[str] | None = None) -> None:
        """Run jobs of `queues` (default: `queues()`) until `stop_worker()`: `chorus worker`,
        or the worker inside `chorus serve`."""
        queues = list(queues if queues is not None else self.queues())
        if not queues:
            # procrastinate reads no queues as every queue.
            raise ValueError("a worker needs at least one queue")
        stalled = self.settings.stalled_seconds
        worker = Worker(
            app=self.app,
            queues=queues,
            concurrency=self.settings.concurrency,
            wait=True,
            install_signal_handlers=False,
            delete_jobs="successful",
            fetch_job_polling_interval=self.settings.poll_seconds,
            update_heartbeat_interval=stalled / 3,
            stalled_worker_timeout=stalled,
        )
        try:
            self._opening = asyncio.ensure_future(self.app.open_async())
            try:
                await self._opening
            except asyncio.CancelledError:
                if self._stop_requested:
                    return
                raise
            finally:
                self._opening = None
            if self._stop_requested:
                return
            stopped = asyncio.Event()
            retrying = asyncio.create_task(self._retry_stalled_jobs(queues, stopped), name="jobs-stalled")
            try:
                # No await between the check above and `run()` clearing procrastinate's
                # stop flag, so a stop request always reaches the worker.
                self._running = worker
                await worker.run()  # type: ignore[no-untyped-call]
            finally:
                self._running = None
                stopped.set()
                await retrying
        finally:
            # Also when stopped while the pool still opens: `async with app.open_async()`
            # would never close it then, and an open pool's tasks survive the cancel of
            # the event loop's end (psycopg_pool catches CancelledError in them).
            await self.app.close_async()

    async def _retry_stalled_jobs(self, queues: Sequence[str], stopped: asyncio.Event) -> None:
        """Jobs of `queues` left `doing` by a worker that died run again (on start, then periodically)."""
        stalled = self.settings.stalled_seconds
        while not stopped.is_set():
            try:
                for queue in queues:
                    for job in await self.app.job_manager.get_stalled_jobs(
                        queue=queue, seconds_since_heartbeat=stalled
                    ):
                        log.warning("job %s (%s) of a dead worker runs again", job.id, job.task_name)
                        await self.app.job_manager.retry_job(job)
            except Exception:
                log.exception("looking for stalled jobs failed")
            with suppress(TimeoutError):
                async with asyncio.timeout(stalled / 2):
                    await stopped.wait()

    def _task(self, name: str) -> JobFunction:
        definitions = self.definitions

        async def run(session_id: str, seq: int) -> None:
            await definitions.run(name, session_id, seq)

        run.__name__ = name.replace(".", "_")
        return run

    async def _fire_timer(
        self, job: str, session_id: str, seq: int, delay: float, lane: str | None = None
    ) -> None:
        """A timer fell due: defer its job, under the session's lock like every other, on the
        queue of its lane when it needs one.

        If the session had a newer message meanwhile, the timer waits again instead.
        """
        lane_argument = {"lane": lane} if lane is not None else {}
        newest = await self.db.run(self.messages.latest_conversation_message, session_id)
        if newest is not None and newest[0] > seq:
            newest_seq, said_at = newest
            with suppress(AlreadyEnqueued):
                await self.app.configure_task(
                    TIMER_TASK,
                    queue=QUEUE,
                    queueing_lock=queueing_lock(TIMER_TASK, job, session_id),
                    schedule_at=said_at + timedelta(seconds=delay),
                ).defer_async(job=job, session_id=session_id, seq=newest_seq, delay=delay, **lane_argument)
            return
        with suppress(AlreadyEnqueued):
            await self.app.configure_task(
                task_name(job),
                queue=queue_for(lane),
                lock=session_id,
                queueing_lock=queueing_lock(job, session_id),
            ).defer_async(session_id=session_id, seq=seq)


def _report_end(worker: asyncio.Task[None]) -> None:
    if not worker.cancelled() and worker.exception() is not None:
        log.error("the job worker stopped: %s", worker.exception(), exc_info=worker.exception())


def queueing_lock(*parts: str) -> str:
    return ":".join(parts)
