"""After-turn jobs on SQLite: enqueued with the reply, run at least once, one session at a time."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text, update
from sqlalchemy.engine import Connection

from bot.cli import main as chorus
from bot.cli.serve import build_service
from bot.config import JobSettings
from bot.errors import ConfigError, ProviderUnavailable
from bot.jobs import FLUSH_IDLE_MEMORY, MAINTAIN_CONTEXT, OFFLOAD_MEMORY
from bot.jobs.runner import LocalJobRunner
from bot.runtime import Runtime
from bot.storage.jobs import JOBS, ClaimedJob, JobRequest, JobSink, SqliteJobs
from bot.storage.models import utcnow
from tests.fakes.openai_server import FakeOpenAI, server_error
from tests.jobs.support import Timeline, definitions_of, enqueue, recording_job, wait_for
from tests.support.runtime import REPO_CONFIG, RuntimeFactory, inbound, make_settings


def queued(runtime: Runtime) -> list[tuple[str, int, str | None]]:
    with runtime.database.connect() as connection:
        rows = connection.execute(text("SELECT name, seq, claimed_by FROM jobs ORDER BY name")).all()
    return [(row.name, row.seq, row.claimed_by) for row in rows]


def count(runtime: Runtime, query: str) -> int:
    with runtime.database.connect() as connection:
        return int(connection.execute(text(query)).scalar_one())


class FailsAfterEnqueue:
    """A sink whose transaction fails after the jobs are written (a full disk, a lost connection)."""

    def __init__(self, inner: JobSink) -> None:
        self.inner = inner

    def enqueue(self, connection: Connection, requests: Sequence[JobRequest]) -> None:
        self.inner.enqueue(connection, requests)
        raise RuntimeError("the disk is full")


async def test_a_reply_enqueues_its_jobs_keyed_by_its_seq(runtimes: RuntimeFactory, tmp_path: Path) -> None:
    # No worker: the jobs stay queued where the test can read them. Every job has work
    # after every turn: each reply reaches the offload's trigger, and any context is past
    # the share where compaction starts.
    runtime = runtimes(tmp_path, jobs_worker=False, memory_turns_threshold=1, context_compact_share=0.0)
    reply = await runtime.engine.respond(inbound("hello"))
    assert reply.kind == "assistant"
    seq = count(runtime, "SELECT seq FROM messages WHERE role = 'assistant'")
    assert queued(runtime) == [
        (MAINTAIN_CONTEXT, seq, None),
        (FLUSH_IDLE_MEMORY, seq, None),
        (OFFLOAD_MEMORY, seq, None),
    ]
    # Due now: the two jobs; the timer is not.
    assert runtime.engine.pending_jobs == 2
    await runtime.engine.respond(inbound("and again"))
    later = count(runtime, "SELECT max(seq) FROM messages WHERE role = 'assistant'")
    # A waiting job covers the next turn too; the idle timer moves to the newest reply.
    assert queued(runtime) == [
        (MAINTAIN_CONTEXT, seq, None),
        (FLUSH_IDLE_MEMORY, later, None),
        (OFFLOAD_MEMORY, seq, None),
    ]
    with runtime.database.connect() as connection:
        timer = connection.execute(
            text("SELECT run_after FROM jobs WHERE name = :n"), {"n": FLUSH_IDLE_MEMORY}
        )
        assert timer.scalar_one() > (utcnow() + timedelta(seconds=500)).replace(tzinfo=None).isoformat(" ")


async def test_a_turn_whose_reply_is_not_stored_enqueues_nothing(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    assert runtime.stores.messages.jobs is not None
    runtime.stores.messages.jobs = FailsAfterEnqueue(runtime.stores.messages.jobs)
    # The unforeseen failure ends the turn with an error reply, not the caller.
    reply = await runtime.engine.respond(inbound("hello"))
    assert reply.kind == "error" and "RuntimeError" in reply.text
    # The question is kept; the reply and its jobs were one transaction, and it failed.
    assert count(runtime, "SELECT count(*) FROM messages WHERE role = 'user'") == 1
    assert count(runtime, "SELECT count(*) FROM messages WHERE role = 'assistant'") == 0
    assert queued(runtime) == []


async def test_a_turn_the_model_fails_enqueues_nothing(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False, model_base_url=fake_openai.base_url, model_max_retries=0)
    fake_openai.script(server_error(500))
    reply = await runtime.engine.respond(inbound("hello"))
    assert reply.kind == "error"
    assert queued(runtime) == []


async def test_jobs_run_after_the_turn(runtimes: RuntimeFactory, tmp_path: Path) -> None:
    runtime = runtimes(tmp_path, memory_turns_threshold=1)
    reply = await runtime.engine.respond(inbound("We decided to ship on Friday."))
    await runtime.engine.drain()
    # The offload ran: the memory cursor is past the reply. The timer waits for its time.
    assert count(runtime, "SELECT last_seq FROM memory_cursors") == count(
        runtime, "SELECT seq FROM messages WHERE role = 'assistant'"
    )
    assert [name for name, _, _ in queued(runtime)] == [FLUSH_IDLE_MEMORY]
    assert reply.session_id is not None


def runner(runtime: Runtime, owner: str, definitions: object) -> LocalJobRunner:
    return LocalJobRunner(SqliteJobs(runtime.database), definitions, JobSettings(), owner)  # type: ignore[arg-type]


async def test_a_failing_job_runs_again_until_it_succeeds(runtimes: RuntimeFactory, tmp_path: Path) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    timeline = Timeline()
    attempts: list[int] = []

    async def fail_once(_session: str) -> None:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            raise RuntimeError("the model is down")

    local = runner(runtime, "one", definitions_of({"flaky": recording_job(timeline, "flaky", fail_once)}))
    table = SqliteJobs(runtime.database)
    try:
        enqueue(runtime.database, table, ("flaky", "s1"))
        await local.start()
        await wait_for(timeline.finished("flaky", "s1"), "the retried job")
        assert attempts == [1, 2]
        await local.drain()
        assert table.count() == 0
    finally:
        await local.aclose()


@pytest.mark.parametrize(
    ("failure", "traceback"),
    [(ProviderUnavailable("The model is unreachable right now (could not connect)."), False),
     (KeyError("summary"), True)],
    ids=["model unreachable", "defect"],
)  # fmt: skip
async def test_a_job_the_model_fails_is_one_log_line_and_a_defect_keeps_its_traceback(
    runtimes: RuntimeFactory,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    failure: Exception,
    traceback: bool,
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    timeline = Timeline()
    attempts: list[int] = []

    async def fail_once(_session: str) -> None:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            raise failure

    local = runner(runtime, "one", definitions_of({"flaky": recording_job(timeline, "flaky", fail_once)}))
    try:
        enqueue(runtime.database, SqliteJobs(runtime.database), ("flaky", "s1"))
        with caplog.at_level(logging.WARNING, logger="bot.jobs"):
            await local.start()
            await wait_for(timeline.finished("flaky", "s1"), "the retried job")
    finally:
        await local.aclose()
    (record,) = [record for record in caplog.records if record.name == "bot.jobs.runner"]
    assert "job flaky of session s1 failed (run 1)" in record.getMessage()
    assert (record.exc_info is not None) == traceback
    if not traceback:
        assert record.levelno == logging.WARNING and "could not connect" in record.getMessage()


async def test_one_sessions_jobs_never_overlap_even_across_two_runners(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    table = SqliteJobs(runtime.database)
    timeline = Timeline()
    runners: list[LocalJobRunner] = []

    async def while_first_runs(session: str) -> None:
        # Another job of this session and one of another session become due now;
        # both runners look. Only the other session's job may start.
        enqueue(runtime.database, table, ("second", session), ("other", "s2"))
        for each in runners:
            each.wake()
        await wait_for(timeline.finished("other", "s2"), "the other session's job")

    jobs = {
        "first": recording_job(timeline, "first", while_first_runs),
        "second": recording_job(timeline, "second"),
        "other": recording_job(timeline, "other"),
    }
    runners.extend(runner(runtime, owner, definitions_of(jobs)) for owner in ("a", "b"))
    try:
        enqueue(runtime.database, table, ("first", "s1"))
        for each in runners:
            await each.start()
        await wait_for(timeline.finished("second", "s1"), "the session's second job")
        assert timeline.index("start", "second", "s1") > timeline.index("end", "first", "s1")
        # Other sessions do not wait: s2's job ran while s1's first job was running.
        assert timeline.index("end", "other", "s2") < timeline.index("end", "first", "s1")
        assert [timeline.runs(*job) for job in [("first", "s1"), ("second", "s1"), ("other", "s2")]] == [
            1,
            1,
            1,
        ]
    finally:
        for each in runners:
            await each.aclose()


async def test_a_job_this_runner_does_not_define_is_left_for_one_that_does(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    # Two processes on one database, configured differently (memory off in one of them).
    runtime = runtimes(tmp_path, jobs_worker=False)
    table = SqliteJobs(runtime.database)
    timeline = Timeline()
    without = runner(runtime, "without", definitions_of({"common": recording_job(timeline, "common")}))
    enqueue(runtime.database, table, ("special", "s1"), ("common", "s2"))
    try:
        await without.start()
        await wait_for(timeline.finished("common", "s2"), "the job both runners define")
        # Nothing due is left that this runner could run, and the other job is untouched.
        await without.drain()
        assert [(name, claimed_by) for name, _, claimed_by in queued(runtime)] == [("special", None)]
        with runtime.database.connect() as connection:
            assert connection.execute(text("SELECT attempts FROM jobs")).scalar_one() == 0

        able = runner(runtime, "able", definitions_of({"special": recording_job(timeline, "special")}))
        try:
            await able.start()
            await wait_for(timeline.finished("special", "s1"), "the job only the second runner defines")
            await able.drain()
            assert queued(runtime) == []
        finally:
            await able.aclose()
    finally:
        await without.aclose()


async def test_a_job_a_dead_process_was_running_runs_again_on_start(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    table = SqliteJobs(runtime.database)
    timeline = Timeline()
    enqueue(runtime.database, table, ("work", "s1"), ("work", "s2"))
    with runtime.database.begin() as connection:
        # kill -9 mid-job: s1's job stays claimed by the dead process; s2's by a live one.
        for session, owner in (("s1", "dead"), ("s2", "alive")):
            connection.execute(update(JOBS).where(JOBS.c.session_id == session).values(claimed_by=owner))
    local = runner(runtime, "new", definitions_of({"work": recording_job(timeline, "work")}))
    try:
        await local.start(is_dead=lambda owner: owner == "dead")
        await wait_for(timeline.finished("work", "s1"), "the dead process's job")
        await local.drain()
        assert timeline.runs("work", "s2") == 0
        assert [(row[1], row[2]) for row in queued(runtime)] == [(1, "alive")]
    finally:
        await local.aclose()


def test_sqlite_needs_the_worker_in_serve_and_has_no_chorus_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match="needs PostgreSQL"):
        build_service(make_settings(tmp_path, jobs_worker=False))
    monkeypatch.setenv("CHORUS_DATABASE_URL", f"sqlite:///{tmp_path / 'chorus.db'}")
    assert chorus(["--config", str(REPO_CONFIG), "worker"]) == 2
    assert "`chorus worker` needs PostgreSQL" in capsys.readouterr().err


# Longer than any test waits: a job that runs did not wait for the runner's poll.
NO_POLL = JobSettings(poll_seconds=3600)


class ClaimPasses:
    """Watches the runner's claim passes through the table it reads (on the database threads).

    `ended()` waits for the next pass to finish: the jobs it claimed and when the next job that
    is still waiting falls due, as the runner then knows it.
    """

    def __init__(self, table: SqliteJobs) -> None:
        self.claims = 0
        self.seen: list[tuple[list[ClaimedJob], datetime | None]] = []
        self._loop = asyncio.get_running_loop()
        self._ended = asyncio.Event()
        self._claimed: list[ClaimedJob] = []
        claim_due, next_run_after = table.claim_due, table.next_run_after

        def counted_claim_due(*args: Any) -> list[ClaimedJob]:
            self.claims += 1
            self._claimed = claim_due(*args)
            return self._claimed

        def observed_next_run_after(*args: Any) -> datetime | None:
            due = next_run_after(*args)
            self.seen.append((self._claimed, due))
            self._loop.call_soon_threadsafe(self._ended.set)
            return due

        table.claim_due = counted_claim_due  # type: ignore[method-assign]
        table.next_run_after = observed_next_run_after  # type: ignore[method-assign]

    async def ended(self) -> tuple[list[ClaimedJob], datetime | None]:
        seen = len(self.seen)
        while len(self.seen) == seen:
            self._ended.clear()
            await wait_for(self._ended, "a claim pass")
        return self.seen[seen]


async def test_a_job_enqueued_while_its_sessions_jobs_run_runs_right_after_them(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    table = SqliteJobs(runtime.database)
    passes = ClaimPasses(table)
    timeline = Timeline()
    local: list[LocalJobRunner] = []

    async def while_first_runs(session: str) -> None:
        # The claim pass this wake starts finds the session busy and leaves the job waiting.
        enqueue(runtime.database, table, ("second", session))
        local[0].wake()
        assert await passes.ended() == ([], None)

    jobs = {
        "first": recording_job(timeline, "first", while_first_runs),
        "second": recording_job(timeline, "second"),
    }
    local.append(LocalJobRunner(table, definitions_of(jobs), NO_POLL, "one"))  # type: ignore[arg-type]
    try:
        enqueue(runtime.database, table, ("first", "s1"))
        await local[0].start()
        await wait_for(timeline.finished("second", "s1"), "the job enqueued while the session was busy")
        assert timeline.index("start", "second", "s1") > timeline.index("end", "first", "s1")
    finally:
        await local[0].aclose()


async def test_a_failed_job_is_retried_when_its_wait_is_over_without_a_poll(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    timeline = Timeline()
    attempts: list[int] = []

    async def fail_once(_session: str) -> None:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            raise RuntimeError("the model is down")

    definitions = definitions_of({"flaky": recording_job(timeline, "flaky", fail_once)})
    local = LocalJobRunner(SqliteJobs(runtime.database), definitions, NO_POLL, "one")  # type: ignore[arg-type]
    try:
        enqueue(runtime.database, SqliteJobs(runtime.database), ("flaky", "s1"))
        await local.start()
        await wait_for(timeline.finished("flaky", "s1"), "the retried job")
        assert attempts == [1, 2]
    finally:
        await local.aclose()


async def test_a_job_waiting_behind_its_busy_session_does_not_keep_the_runner_claiming(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    table = SqliteJobs(runtime.database)
    passes = ClaimPasses(table)
    timeline = Timeline()
    local: list[LocalJobRunner] = []
    claims_while_busy: list[int] = []

    async def while_first_runs(session: str) -> None:
        before = passes.claims
        enqueue(runtime.database, table, ("second", session))
        local[0].wake()
        # "second" is due, but its session is busy: nothing to claim, and no time to wake up
        # for, so the runner sleeps until woken rather than claiming again and again.
        assert await passes.ended() == ([], None)
        # Woken for another session's job, it claims that one and sleeps again.
        enqueue(runtime.database, table, ("other", "s2"))
        local[0].wake()
        await wait_for(timeline.finished("other", "s2"), "the other session's job")
        claims_while_busy.append(passes.claims - before)

    jobs = {
        "first": recording_job(timeline, "first", while_first_runs),
        "second": recording_job(timeline, "second"),
        "other": recording_job(timeline, "other"),
    }
    local.append(LocalJobRunner(table, definitions_of(jobs), NO_POLL, "one"))  # type: ignore[arg-type]
    try:
        enqueue(runtime.database, table, ("first", "s1"))
        await local[0].start()
        await wait_for(timeline.finished("second", "s1"), "the job behind the busy session")
        # One pass for each wake-up, not a pass after pass while the job could not be taken.
        assert claims_while_busy == [2]
    finally:
        await local[0].aclose()
