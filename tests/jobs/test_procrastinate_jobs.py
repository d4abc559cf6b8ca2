"""After-turn jobs on PostgreSQL, through procrastinate: deferred in the reply's transaction,
run by workers, one session's jobs never at once across workers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from procrastinate.exceptions import AppNotOpen
from sqlalchemy import text

from bot.config import JobSettings
from bot.jobs import MAINTAIN_CONTEXT, OFFLOAD_MEMORY
from bot.jobs.postgres import TIMER_TASK, ProcrastinateJobs, ProcrastinateSink, task_name
from bot.runtime import Runtime
from tests.durable.serve_process import READY_SECONDS, wait_until
from tests.jobs.support import Timeline, definitions_of, enqueue, recording_job, wait_for
from tests.jobs.test_local_jobs import FailsAfterEnqueue
from tests.support.peers import needs_postgres
from tests.support.postgres import refuse_new_connections
from tests.support.runtime import RuntimeFactory, inbound
from tests.support.teardown import no_pool_tasks_left, pool_tasks

pytestmark = needs_postgres


def procrastinate_jobs(runtime: Runtime) -> list[Any]:
    query = "SELECT task_name, lock, status, args, scheduled_at FROM procrastinate_jobs ORDER BY id"
    with runtime.database.connect() as connection:
        return list(connection.execute(text(query)))


def count(runtime: Runtime, query: str) -> int:
    with runtime.database.connect() as connection:
        return int(connection.execute(text(query)).scalar_one())


async def test_a_reply_defers_its_jobs_in_its_transaction(
    postgres_url: str,
    runtimes: RuntimeFactory,
    tmp_path: Path,
) -> None:
    # Every job has work after every turn (see tests/jobs/test_jobs_with_work.py).
    runtime = runtimes(
        tmp_path,
        database_url=postgres_url,
        jobs_worker=False,
        memory_turns_threshold=1,
        context_compact_share=0.0,
    )
    reply = await runtime.engine.respond(inbound("hello"))
    session = reply.session_id
    seq = count(runtime, "SELECT seq FROM messages WHERE role = 'assistant'")
    jobs = procrastinate_jobs(runtime)
    assert [(job.task_name, job.lock, job.status) for job in jobs] == [
        (task_name(MAINTAIN_CONTEXT), session, "todo"),
        (task_name(OFFLOAD_MEMORY), session, "todo"),
        # The idle timer holds no lock: a future job with one would hold back the session.
        (TIMER_TASK, None, "todo"),
    ]
    assert [job.args["seq"] for job in jobs] == [seq, seq, seq]
    assert jobs[2].scheduled_at is not None and runtime.engine.pending_jobs == 2
    await runtime.engine.respond(inbound("and again"))
    # The waiting jobs and the waiting timer cover the second turn too (queueing locks): the
    # timer, when it fires, finds the newer reply and waits again from there.
    assert [job.task_name for job in procrastinate_jobs(runtime)] == [
        task_name(MAINTAIN_CONTEXT),
        task_name(OFFLOAD_MEMORY),
        TIMER_TASK,
    ]


async def test_a_turn_whose_reply_is_not_stored_defers_nothing(
    postgres_url: str,
    runtimes: RuntimeFactory,
    tmp_path: Path,
) -> None:
    runtime = runtimes(tmp_path, database_url=postgres_url, jobs_worker=False)
    assert runtime.stores.messages.jobs is not None
    runtime.stores.messages.jobs = FailsAfterEnqueue(runtime.stores.messages.jobs)
    # The unforeseen failure ends the turn with an error reply, not the caller.
    reply = await runtime.engine.respond(inbound("hello"))
    assert reply.kind == "error" and "RuntimeError" in reply.text
    assert count(runtime, "SELECT count(*) FROM messages WHERE role = 'user'") == 1
    assert count(runtime, "SELECT count(*) FROM messages WHERE role = 'assistant'") == 0
    assert procrastinate_jobs(runtime) == []


async def test_the_worker_runs_the_jobs(
    postgres_url: str,
    runtimes: RuntimeFactory,
    tmp_path: Path,
) -> None:
    runtime = runtimes(tmp_path, database_url=postgres_url, memory_turns_threshold=1)
    await runtime.engine.respond(inbound("We decided to ship on Friday."))
    await runtime.engine.drain()
    assert count(runtime, "SELECT last_seq FROM memory_cursors") == count(
        runtime, "SELECT seq FROM messages WHERE role = 'assistant'"
    )
    # Finished jobs are deleted; only the idle timer waits for its time.
    assert [job.task_name for job in procrastinate_jobs(runtime)] == [TIMER_TASK]


async def test_one_sessions_jobs_never_overlap_across_two_workers(
    postgres_url: str,
    runtimes: RuntimeFactory,
    tmp_path: Path,
) -> None:
    runtime = runtimes(tmp_path, database_url=postgres_url, jobs_worker=False)
    timeline = Timeline()
    workers: list[ProcrastinateJobs] = []

    async def while_first_runs(session: str) -> None:
        # Another job of this session, then one of another session: the second can only
        # be fetched after the first, yet it must wait for this job to end.
        enqueue(runtime.database, ProcrastinateSink(), ("second", session))
        enqueue(runtime.database, ProcrastinateSink(), ("other", "s2"))
        await wait_for(timeline.finished("other", "s2"), "the other session's job")

    jobs = {
        "first": recording_job(timeline, "first", while_first_runs),
        "second": recording_job(timeline, "second"),
        "other": recording_job(timeline, "other"),
    }
    settings = JobSettings(stalled_seconds=30, poll_seconds=0.2)
    for _ in range(2):
        workers.append(
            ProcrastinateJobs(runtime.stores.messages, postgres_url, definitions_of(jobs), settings)
        )
    try:
        for worker in workers:
            await worker.start()
        enqueue(runtime.database, ProcrastinateSink(), ("first", "s1"))
        await wait_for(timeline.finished("second", "s1"), "the session's second job")
        assert timeline.index("start", "second", "s1") > timeline.index("end", "first", "s1")
        assert timeline.index("end", "other", "s2") < timeline.index("end", "first", "s1")
        assert [timeline.runs(*job) for job in [("first", "s1"), ("second", "s1"), ("other", "s2")]] == [
            1,
            1,
            1,
        ]
    finally:
        for worker in workers:
            await worker.aclose()


async def test_the_idle_flush_timer_fires_and_offloads_a_quiet_session(
    postgres_url: str, runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    # No offload trigger is reached (8 turns, 6,000 characters, 20 messages): only the idle
    # flush, a second after the last reply, can move the memory cursor. The timer set by the
    # first reply fires, finds the second, and waits again.
    runtime = runtimes(tmp_path, database_url=postgres_url, memory_idle_seconds=1)
    await runtime.engine.respond(inbound("We decided to ship on Friday."))
    await runtime.engine.respond(inbound("And to meet on Monday."))
    await wait_until(
        lambda: count(runtime, "SELECT coalesce(max(last_seq), 0) FROM memory_cursors") == 4,
        what="the idle flush",
    )
    await runtime.engine.drain()
    assert procrastinate_jobs(runtime) == []


async def test_a_worker_stopped_while_its_pool_still_connects_leaves_no_pool_running(
    postgres_url: str, runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    # A stop soon after the start while the database turns connections away (a restart,
    # max_connections reached): the worker stops with its pool still opening. A pool
    # left open there keeps its tasks, which ignore cancels, and the process never ends.
    runtime = runtimes(tmp_path, database_url=postgres_url)
    refuse_new_connections(postgres_url)
    await runtime.jobs.start()
    await wait_until(pool_tasks, what="the worker opening its pool")
    await runtime.aclose()
    await no_pool_tasks_left("the runtime closed")


async def test_a_stop_that_lands_as_the_workers_start_gets_a_connection_still_stops_it(
    postgres_url: str, runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    # The start waits for a pool connection (procrastinate registers the worker while
    # the stalled-job scan holds the pool's first one). psycopg_pool loses a cancel that
    # lands just as it hands that connection over: a worker stopped by cancelling ran on
    # then, its pool open for good. The stop lands 0 to 3 loop steps after the handover.
    runtime = runtimes(tmp_path, database_url=postgres_url)
    jobs = runtime.jobs
    assert isinstance(jobs, ProcrastinateJobs)
    for steps in range(4):
        await jobs.start()
        await step_until(lambda: clients_waiting_for_a_connection(jobs) > 0, "the start to wait")
        await step_until(lambda: clients_waiting_for_a_connection(jobs) == 0, "the connection")
        for _ in range(steps):
            await asyncio.sleep(0)
        await jobs.aclose()
        await no_pool_tasks_left(f"the worker stopped {steps} steps after the handover")


def clients_waiting_for_a_connection(jobs: ProcrastinateJobs) -> int:
    try:
        pool = jobs.app.connector.pool  # type: ignore[attr-defined]
    except AppNotOpen:
        return 0
    return int(pool.get_stats()["requests_waiting"])


async def step_until(condition: Callable[[], bool], what: str) -> None:
    """Run the event loop one step at a time until `condition`: the moment, not a poll later."""
    deadline = time.monotonic() + READY_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0)
