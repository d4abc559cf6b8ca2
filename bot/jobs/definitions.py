"""The after-turn jobs: one definition each, run by the local runner or by procrastinate.

A job gets a session id and the seq of the message whose transaction enqueued it.
Every job is idempotent: it reads the session as it is when it runs and stores
only what is still missing (the memory cursor moves only past stored items; a
summary or collapse of a range is stored once), so a job run twice — after a
crash, or by a retry — does nothing the second time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from bot.config import MemorySettings
from bot.context.maintenance import ContextMaintainer
from bot.memory.service import MemoryService
from bot.providers.after_turn import PrefixOnce
from bot.storage.boundary import boundary_for
from bot.storage.jobs import JobSpec
from bot.storage.messages import MessageStore
from bot.storage.sessions import SessionStore
from bot.turns.after_turn import AfterTurn

MAINTAIN_CONTEXT = "context.maintain"
OFFLOAD_MEMORY = "memory.offload"
FLUSH_IDLE_MEMORY = "memory.idle_flush"

JobFunction = Callable[[str, int], Awaitable[None]]
# Whether a job has work in the state a turn's reply leaves (run on a database thread).
HasWork = Callable[[AfterTurn], bool]
# At shutdown, running jobs get this long to finish. One still running then is left
# as a crash would leave it, and runs again on the next start (or another worker).
SHUTDOWN_SECONDS = 20.0


class JobQueue(Protocol):
    """What the engine and the process edges see of the queue, whichever runs it."""

    definitions: JobDefinitions

    def wake(self) -> None:
        """Jobs were just enqueued in this process: look now rather than at the next poll."""

    async def start(self, is_dead: Callable[[str], bool] | None = None, lanes: Sequence[str] = ()) -> None:
        """Run jobs in this process from now on (`jobs.worker`), and those that need one of its
        `lanes`; `is_dead` tells which other runners are gone."""

    async def drain(self) -> None:
        """Wait until no job is due or running (tests, benchmarks)."""

    def pending(self) -> int:
        """Jobs due or running (timers not yet due are not waiting for anything)."""

    async def aclose(self) -> None:
        """Stop taking jobs; running ones finish."""


class JobDefinitions:
    """The named jobs and the specs a stored reply enqueues."""

    def __init__(self) -> None:
        self._jobs: dict[str, JobFunction] = {}
        self._has_work: dict[str, HasWork] = {}
        self.after_turn: tuple[JobSpec, ...] = ()

    def add_job(self, job: Job) -> None:
        """Name `job`; one a reply enqueues joins the after-turn specs, in the order added."""
        self.add(job.name, job.run, has_work=job.has_work)
        if job.after_turn is not None:
            self.after_turn = (*self.after_turn, job.after_turn)

    def add(self, name: str, function: JobFunction, *, has_work: HasWork | None = None) -> None:
        """Name a job (or replace it); `has_work` tells a turn whether its reply should
        enqueue it, and a job without one is enqueued by every reply that names it."""
        self._jobs[name] = function
        if has_work is None:
            self._has_work.pop(name, None)
        else:
            self._has_work[name] = has_work

    def with_work(self, turn: AfterTurn) -> tuple[JobSpec, ...]:
        """The after-turn jobs with work in `turn`'s state; a timer, or a job that cannot
        tell, always."""
        return tuple(
            spec
            for spec in self.after_turn
            if (has_work := self._has_work.get(spec.name)) is None or has_work(turn)
        )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._jobs)

    async def run(self, name: str, session_id: str, seq: int) -> None:
        function = self._jobs.get(name)
        if function is None:
            raise LookupError(f"no job named {name!r}")
        await function(session_id, seq)


@dataclass(frozen=True)
class Job:
    """One named job of a feature; `after_turn` set: a stored reply enqueues it (when it has work)."""

    name: str
    run: JobFunction
    has_work: HasWork | None = None
    after_turn: JobSpec | None = None


def context_jobs(sessions: SessionStore, maintainer: ContextMaintainer) -> tuple[Job, ...]:
    """Context maintenance after a turn: compaction and collapse when due."""
    db = boundary_for(sessions.database)

    async def maintain_context(session_id: str, _seq: int) -> None:
        session = await db.run(sessions.get_session, session_id)
        if session is not None:
            await maintainer.after_turn(session)

    def context_has_work(turn: AfterTurn) -> bool:
        return maintainer.has_work(turn.session.id, turn.view, turn.context, turn.recall_allowance)

    return (Job(MAINTAIN_CONTEXT, maintain_context, context_has_work, JobSpec(MAINTAIN_CONTEXT)),)


def memory_jobs(
    sessions: SessionStore,
    messages: MessageStore,
    maintainer: ContextMaintainer,
    memory: MemoryService,
    settings: MemorySettings,
) -> tuple[Job, ...]:
    """Memory's offload after a turn and, once a session goes quiet, its idle flush."""
    if not settings.enabled:
        return ()
    db = boundary_for(sessions.database)

    async def offload_memory(session_id: str, _seq: int) -> None:
        session = await db.run(sessions.get_session, session_id)
        if session is not None:
            # The distillation starts with the conversation's last request (server's cache).
            await memory.offload_due(session, PrefixOnce(partial(maintainer.shared_prefix, session)))

    def offload_has_work(turn: AfterTurn) -> bool:
        return memory.offload_has_work(turn.session, turn.view.rows)

    jobs = [Job(OFFLOAD_MEMORY, offload_memory, offload_has_work, JobSpec(OFFLOAD_MEMORY))]
    if settings.idle_seconds > 0:

        async def flush_idle_memory(session_id: str, seq: int) -> None:
            session = await db.run(sessions.get_session, session_id)
            newest = await db.run(messages.latest_conversation_message, session_id)
            # A newer message means the session did not go quiet: its own timer follows.
            if session is not None and (newest is None or newest[0] <= seq):
                await memory.flush_idle(session, PrefixOnce(partial(maintainer.shared_prefix, session)))

        idle = JobSpec(FLUSH_IDLE_MEMORY, delay_seconds=settings.idle_seconds)
        jobs.append(Job(FLUSH_IDLE_MEMORY, flush_idle_memory, after_turn=idle))
    return tuple(jobs)
