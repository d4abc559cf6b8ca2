"""After-turn jobs in the database: what a stored message asks for, and the SQLite job table.

A message that ends a turn names the jobs to run after it (`JobSpec`); `MessageStore.append`
hands them, with the message's seq, to a `JobSink` inside the message's own
transaction, so the job exists exactly when the message does. On SQLite the sink is
`SqliteJobs` (the `jobs` table, run by `bot.jobs.runner`); on PostgreSQL it is the
procrastinate binding (`bot.jobs.postgres`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from sqlalchemy import bindparam, delete, func, select, text, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlalchemy.exc import IntegrityError

from bot.storage.job_models import QueuedJob
from bot.storage.models import table_of, utcnow
from bot.storage.prepared import Prepared

JOBS = table_of(QueuedJob)


@dataclass(frozen=True)
class JobSpec:
    """A job a stored message asks for."""

    name: str
    # Run this long after the message (a timer) rather than as soon as possible.
    delay_seconds: float = 0.0

    @property
    def is_timer(self) -> bool:
        return self.delay_seconds > 0


@dataclass(frozen=True)
class JobRequest:
    """A job to enqueue for one session, keyed by the seq of the message that asked for it."""

    name: str
    session_id: str
    seq: int
    run_after: datetime
    # A timer's wait after the session's newest message (0: not a timer).
    delay_seconds: float = 0.0
    # The lane the job needs running beside it (a reminder's delivery), or None: with several
    # processes, only one running that lane runs the job.
    lane: str | None = None

    @property
    def is_timer(self) -> bool:
        return self.delay_seconds > 0

    @classmethod
    def of(cls, spec: JobSpec, session_id: str, seq: int, now: datetime) -> JobRequest:
        delay = spec.delay_seconds
        return cls(spec.name, session_id, seq, now + timedelta(seconds=delay), delay)


class JobSink(Protocol):
    def enqueue(self, connection: Connection, requests: Sequence[JobRequest]) -> None:
        """Write `requests` on `connection`, inside the caller's transaction."""


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    name: str
    session_id: str
    seq: int
    attempts: int


# A waiting job and a new request for the same job and session are one run. A timer
# moves to the newest request: it fires once the session has been quiet long enough.
# Prepared: a turn's stored message enqueues its jobs in the same transaction (see `bot.storage.prepared`).
JOIN_WAITING = Prepared(sqlite_insert(JOBS).on_conflict_do_nothing())
_TIMER = sqlite_insert(JOBS)
MOVE_TIMER = Prepared(
    _TIMER.on_conflict_do_update(
        index_elements=[JOBS.c.name, JOBS.c.session_id],
        index_where=JOBS.c.claimed_by.is_(None),
        set_={"seq": _TIMER.excluded.seq, "run_after": _TIMER.excluded.run_after},
    )
)
# Every due job this runner defines, of every session that has no job running: one
# session's jobs never overlap. A job only another process's configuration defines
# (memory switched off here, say) is left for that process.
CLAIM_DUE = (
    update(JOBS)
    .where(
        JOBS.c.claimed_by.is_(None),
        JOBS.c.run_after <= bindparam("now"),
        JOBS.c.name.in_(bindparam("names", expanding=True)),
        JOBS.c.session_id.not_in(select(JOBS.c.session_id).where(JOBS.c.claimed_by.is_not(None))),
    )
    .values(claimed_by=bindparam("owner"), attempts=JOBS.c.attempts + 1)
    .returning(JOBS.c.id, JOBS.c.name, JOBS.c.session_id, JOBS.c.seq, JOBS.c.attempts)
)

# When the next claim of this runner could take a job. A session with a job running is
# left out (its waiting jobs are claimed when that job ends: the runner looks again then),
# and so are jobs this runner does not define: a due one of either would otherwise make
# the runner claim again and again, finding nothing, until it could be taken.
NEXT_CLAIMABLE = select(func.min(JOBS.c.run_after)).where(
    JOBS.c.claimed_by.is_(None),
    JOBS.c.name.in_(bindparam("names", expanding=True)),
    JOBS.c.session_id.not_in(select(JOBS.c.session_id).where(JOBS.c.claimed_by.is_not(None))),
)


class SqliteJobs:
    """The `jobs` table: the sink the store writes to and the queue the local runner reads."""

    def __init__(self, database: DatabaseEngine) -> None:
        self.database = database

    def enqueue(self, connection: Connection, requests: Sequence[JobRequest]) -> None:
        for request in requests:
            statement = MOVE_TIMER if request.is_timer else JOIN_WAITING
            statement.execute(
                connection,
                {
                    "name": request.name,
                    "session_id": request.session_id,
                    "seq": request.seq,
                    "run_after": request.run_after,
                    "attempts": 0,
                    "created_at": utcnow(),
                },
            )

    def claim_due(self, owner: str, now: datetime, names: Sequence[str]) -> list[ClaimedJob]:
        with self.database.begin() as connection:
            rows = connection.execute(CLAIM_DUE, {"owner": owner, "now": now, "names": list(names)}).all()
        return sorted((ClaimedJob(*row) for row in rows), key=lambda job: job.id)

    def finish(self, job_id: int) -> None:
        with self.database.begin() as connection:
            connection.execute(delete(JOBS).where(JOBS.c.id == job_id))

    def release(self, job_id: int, run_after: datetime) -> None:
        """Put a claimed job back to wait until `run_after` (a retry, or a claim of a dead process)."""
        try:
            with self.database.begin() as connection:
                connection.execute(
                    update(JOBS).where(JOBS.c.id == job_id).values(claimed_by=None, run_after=run_after)
                )
        except IntegrityError:
            # The same job of the session was requested again meanwhile: that one waits for both.
            self.finish(job_id)

    def claimed_by_others(self, owner: str) -> list[tuple[int, str]]:
        query = select(JOBS.c.id, JOBS.c.claimed_by).where(
            JOBS.c.claimed_by.is_not(None), JOBS.c.claimed_by != owner
        )
        with self.database.connect() as connection:
            return [(row.id, row.claimed_by) for row in connection.execute(query)]

    def count(
        self, due_by: datetime | None = None, owner: str | None = None, names: Sequence[str] | None = None
    ) -> int:
        """Jobs waiting or running; with `due_by`, `owner` and `names`, those due that `owner`
        runs or may claim."""
        query = select(func.count()).select_from(JOBS)
        if due_by is not None:
            query = query.where(JOBS.c.run_after <= due_by)
        if owner is not None:
            query = query.where(JOBS.c.claimed_by.is_(None) | (JOBS.c.claimed_by == owner))
        if names is not None:
            query = query.where(JOBS.c.name.in_(list(names)))
        with self.database.connect() as connection:
            return int(connection.execute(query).scalar_one())

    def next_run_after(self, names: Sequence[str]) -> datetime | None:
        """When the next job a claim for `names` could take falls due (None: none waits)."""
        with self.database.connect() as connection:
            found: datetime | None = connection.execute(NEXT_CLAIMABLE, {"names": list(names)}).scalar()
        # SQLite hands back the stored UTC time without its zone.
        return found.replace(tzinfo=UTC) if found is not None and found.tzinfo is None else found


def procrastinate_jobs_count(
    database: DatabaseEngine, queues: Sequence[str], due_by: datetime | None = None
) -> int:
    """procrastinate's jobs in `queues` waiting or running (only those due by `due_by`, when given)."""
    query = text(
        "SELECT count(*) FROM procrastinate_jobs WHERE queue_name IN :queues AND status IN ('todo', 'doing')"
        + (" AND (scheduled_at IS NULL OR scheduled_at <= :due_by)" if due_by is not None else "")
    ).bindparams(bindparam("queues", expanding=True))
    with database.connect() as connection:
        return int(connection.execute(query, {"queues": list(queues), "due_by": due_by}).scalar_one())
