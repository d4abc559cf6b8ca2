"""Runs after-turn jobs from the SQLite job table inside this process.

One loop claims every due job of every session with no job running (one
conditional UPDATE, so a job is claimed once) and runs each session's jobs one
after another, several sessions at once. A job is deleted when it has run; one
that fails waits a growing time and runs again, `max_attempts` runs in all. A job
still claimed by a process that is gone (kill -9 mid-job) is put back to wait on
start, so it runs again: at least once, never lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextlib import suppress
from datetime import datetime, timedelta

from bot.config import JobSettings
from bot.errors import ProviderError, error_line
from bot.jobs.definitions import SHUTDOWN_SECONDS, JobDefinitions
from bot.storage.boundary import boundary_for
from bot.storage.jobs import ClaimedJob, SqliteJobs
from bot.storage.models import utcnow

log = logging.getLogger(__name__)

# The wait before the n-th retry of a failing job: 2, 4, 8 … seconds, at most this.
MAX_RETRY_SECONDS = 300.0


def retry_delay(attempts: int) -> float:
    return float(min(2**attempts, MAX_RETRY_SECONDS))


class LocalJobRunner:
    def __init__(
        self, table: SqliteJobs, definitions: JobDefinitions, settings: JobSettings, owner: str
    ) -> None:
        self.table = table
        self.definitions = definitions
        self.settings = settings
        self.owner = owner
        self.db = boundary_for(table.database)
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        # Each running session's task, with the claim pass that started it.
        self._sessions: dict[asyncio.Task[bool], int] = {}
        self._passes = 0  # claim passes begun
        self._closed = False

    # --- JobQueue ------------------------------------------------------------------

    def wake(self) -> None:
        if self._closed or not self.settings.worker:
            return
        if self._loop_task is None:
            self._loop_task = asyncio.create_task(self._run(), name="jobs")
        self._wake.set()

    async def start(self, is_dead: Callable[[str], bool] | None = None, lanes: Sequence[str] = ()) -> None:
        # One process runs every job of a SQLite database, its lanes' included.
        if not self.settings.worker:
            return
        if is_dead is not None:
            for job_id, owner in await self.db.run(self.table.claimed_by_others, self.owner):
                if is_dead(owner):
                    # Its process died mid-job: the job runs again.
                    await self.db.run(self.table.release, job_id, utcnow())
        self.wake()

    async def drain(self) -> None:
        self.wake()
        while self._sessions or (self._loop_task is not None and await self._due()):
            self._progress.clear()
            await self._progress.wait()

    def pending(self) -> int:
        return self.table.count(due_by=utcnow())

    async def _due(self) -> bool:
        count = self.table.count
        return await self.db.run(count, due_by=utcnow(), owner=self.owner, names=self.definitions.names) > 0

    async def aclose(self) -> None:
        self._closed = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            with suppress(asyncio.CancelledError):
                await self._loop_task
        # Jobs already claimed finish; the rest wait in the table for the next start.
        if self._sessions:
            _, running = await asyncio.wait(set(self._sessions), timeout=SHUTDOWN_SECONDS)
            if running:
                log.warning("jobs still running after %.0f s are left to run again", SHUTDOWN_SECONDS)

    # --- the loop ------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            self._passes += 1
            try:
                claimed, due = await self.db.run(self._claim, utcnow())
            except Exception:
                # The database may be briefly unavailable: the jobs wait for the next pass.
                log.exception("claiming due jobs failed")
                claimed, due = [], None
            by_session: dict[str, list[ClaimedJob]] = defaultdict(list)
            for job in claimed:
                by_session[job.session_id].append(job)
            for jobs in by_session.values():
                task = asyncio.create_task(self._run_session(jobs))
                self._sessions[task] = self._passes
                task.add_done_callback(self._session_done)
            self._progress.set()
            await self._sleep(due)

    def _claim(self, now: datetime) -> tuple[list[ClaimedJob], datetime | None]:
        """The jobs claimed now, and when the next job still waiting falls due (one database call)."""
        names = self.definitions.names
        return self.table.claim_due(self.owner, now, names), self.table.next_run_after(names)

    async def _sleep(self, due: datetime | None) -> None:
        """Until woken, the next job (due at `due`) falls due, or the poll interval passes."""
        timeout = self.settings.poll_seconds
        if due is not None:
            timeout = min(timeout, max((due - utcnow()).total_seconds(), 0.0))
        with suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._wake.wait()

    def _session_done(self, task: asyncio.Task[bool]) -> None:
        started = self._sessions.pop(task, 0)
        if task.cancelled():
            changed = False
        elif (error := task.exception()) is not None:
            log.error("running the jobs of a session failed", exc_info=error)
            changed = True
        else:
            changed = task.result()
        # The session may have jobs waiting behind the ones that ran: due ones that a claim
        # pass begun meanwhile had to leave (the session was busy), or a retry's new due
        # time. Without either there is nothing new to claim, and no pass is spent on it.
        if self._passes > started or changed:
            self._wake.set()
        self._progress.set()

    async def _run_session(self, jobs: list[ClaimedJob]) -> bool:
        """Run a session's claimed jobs in order; True when one was put back for a retry."""
        async with self._slots:
            retried = False
            for job in jobs:
                retried = await self._run_one(job) or retried
            return retried

    async def _run_one(self, job: ClaimedJob) -> bool:
        """Run one job; True when it failed and waits for a retry."""
        try:
            await self.definitions.run(job.name, job.session_id, job.seq)
        except Exception as error:
            # A model that is down or refusing is the operator's to fix and is told in one line;
            # anything else is a defect, logged with its traceback.
            trace = None if isinstance(error, ProviderError) else error
            if job.attempts >= self.settings.max_attempts:
                log.error(
                    "job %s of session %s failed %d times: dropped (%s)",
                    job.name,
                    job.session_id,
                    job.attempts,
                    error_line(error),
                    exc_info=trace,
                )
                await self.db.run(self.table.finish, job.id)
                return False
            delay = retry_delay(job.attempts)
            log.log(
                logging.WARNING if trace is None else logging.ERROR,
                "job %s of session %s failed (run %d): %s; retried in %.0f s",
                job.name,
                job.session_id,
                job.attempts,
                error_line(error),
                delay,
                exc_info=trace,
            )
            await self.db.run(self.table.release, job.id, utcnow() + timedelta(seconds=delay))
            return True
        await self.db.run(self.table.finish, job.id)
        return False
