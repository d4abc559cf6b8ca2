"""Jobs that record when they run, to check what the queues promise."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sqlalchemy.engine import Engine as DatabaseEngine

from bot.jobs.definitions import JobDefinitions
from bot.storage.jobs import JobRequest, JobSink
from bot.storage.models import utcnow

WAIT_SECONDS = 60.0


@dataclass
class Timeline:
    """What ran, in order: ("start"|"end", job, session)."""

    events: list[tuple[str, str, str]] = field(default_factory=list)
    done: dict[tuple[str, str], asyncio.Event] = field(default_factory=dict)

    def finished(self, job: str, session_id: str) -> asyncio.Event:
        return self.done.setdefault((job, session_id), asyncio.Event())

    def index(self, what: str, job: str, session_id: str) -> int:
        return self.events.index((what, job, session_id))

    def runs(self, job: str, session_id: str) -> int:
        return self.events.count(("end", job, session_id))


def recording_job(
    timeline: Timeline, name: str, during: Callable[[str], Awaitable[None]] | None = None
) -> Callable[[str, int], Awaitable[None]]:
    async def run(session_id: str, _seq: int) -> None:
        timeline.events.append(("start", name, session_id))
        if during is not None:
            await during(session_id)
        timeline.events.append(("end", name, session_id))
        timeline.finished(name, session_id).set()

    return run


def definitions_of(jobs: dict[str, Callable[[str, int], Awaitable[None]]]) -> JobDefinitions:
    definitions = JobDefinitions()
    for name, function in jobs.items():
        definitions.add(name, function)
    return definitions


def enqueue(database: DatabaseEngine, sink: JobSink, *jobs: tuple[str, str]) -> None:
    """Enqueue (job, session) pairs in one transaction, as a stored reply does."""
    with database.begin() as connection:
        sink.enqueue(connection, [JobRequest(name, session, 1, utcnow()) for name, session in jobs])


async def wait_for(event: asyncio.Event, what: str) -> None:
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            await event.wait()
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None
