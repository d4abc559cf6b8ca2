"""A real `chorus serve` killed with SIGKILL mid-job: the job runs after the restart.
And `chorus worker` running the jobs of a `chorus serve` whose own worker is off."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bot.memory.distill import MEMORY_PURPOSE
from bot.providers.openai import PURPOSE_HEADER
from tests.durable.serve_process import REPO, ServeProcess, wait_until
from tests.durable.test_shutdown import read_events, start_web_turn
from tests.fakes.openai_server import FakeOpenAI, Hang
from tests.fakes.openai_server import Reply as ModelReply
from tests.support.peers import needs_postgres

Query = Callable[[str], list[Any]]


def querying(database_url: str) -> tuple[Query, Callable[[], None]]:
    """Runs a query on the database the processes use, from outside them."""
    if database_url.startswith("sqlite"):
        path = make_url(database_url).database or ""

        def sqlite_query(query: str) -> list[Any]:
            with sqlite3.connect(path) as connection:
                return connection.execute(query).fetchall()

        return sqlite_query, lambda: None
    engine = create_engine(make_url(database_url).set(drivername="postgresql+psycopg"))

    def postgres_query(query: str) -> list[Any]:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(query))]

    return postgres_query, engine.dispose


def environment(database_url: str, fake_openai: FakeOpenAI, **extra: str) -> dict[str, str]:
    return {
        "CHORUS_DATABASE_URL": database_url,
        "CHORUS_MODEL_BASE_URL": fake_openai.base_url,
        # Every turn is due for a memory offload, which asks the model.
        "CHORUS_MEMORY_TURNS_THRESHOLD": "1",
        "CHORUS_MEMORY_IDLE_SECONDS": "0",
        "CHORUS_MEMORY_DENSE": "false",
        "CHORUS_JOBS_STALLED_SECONDS": "5",
        **extra,
    }


def memory_requests(fake_openai: FakeOpenAI) -> int:
    return sum(
        1 for request in fake_openai.requests if request.headers.get(PURPOSE_HEADER.lower()) == MEMORY_PURPOSE
    )


async def one_turn(serve: ServeProcess, text: str) -> None:
    async with httpx.AsyncClient(timeout=60) as client:
        response = await start_web_turn(client, serve.url, text)
        events = await read_events(response.aiter_lines(), until_first_delta=False)
        await response.aclose()
    assert events[-1]["event"] == "done" and events[-1]["kind"] == "assistant", events


def database_for(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'chorus.db'}"
    return str(request.getfixturevalue("postgres_url"))


RUNNING_JOB = {
    "sqlite": "SELECT name FROM jobs WHERE claimed_by IS NOT NULL",
    "postgres": "SELECT task_name FROM procrastinate_jobs WHERE status = 'doing'",
}


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=needs_postgres)])
async def test_a_job_running_when_serve_is_killed_runs_after_the_restart(
    tmp_path: Path, fake_openai: FakeOpenAI, backend: str, request: pytest.FixtureRequest
) -> None:
    database_url = database_for(backend, tmp_path, request)
    query, close = querying(database_url)
    settings = environment(database_url, fake_openai)
    # The turn's answer, then a memory distillation that never answers: the job is mid-run.
    fake_openai.script(ModelReply("Noted: we ship on Friday."), Hang(seconds=600))
    first = ServeProcess(tmp_path, settings, name="first")
    try:
        await first.start()
        await one_turn(first, "We decided to ship on Friday.")
        await wait_until(lambda: memory_requests(fake_openai) == 1, what="the memory job asking the model")
        assert [row[0] for row in query(RUNNING_JOB[backend])] in (
            ["memory.offload"],
            ["chorus.memory.offload"],
        )
        first.kill()
        assert query("SELECT count(*) FROM memory_cursors") == [(0,)]
        second = ServeProcess(tmp_path, settings, name="second")
        try:
            await second.start()
            # The model answers now; the job runs again and moves the cursor past the reply.
            cursor = await wait_until(
                lambda: query("SELECT last_seq FROM memory_cursors"),
                what="the memory offload after the restart",
            )
            assert cursor == query("SELECT seq FROM messages WHERE role = 'assistant'")
            assert memory_requests(fake_openai) == 2
        finally:
            second.kill()
    finally:
        first.kill()
        close()


@needs_postgres
async def test_chorus_worker_runs_the_jobs_a_serve_without_a_worker_enqueued(
    tmp_path: Path, fake_openai: FakeOpenAI, postgres_url: str
) -> None:
    query, close = querying(postgres_url)
    settings = environment(postgres_url, fake_openai, CHORUS_JOBS_WORKER="false")
    serve = ServeProcess(tmp_path, settings, name="serve")
    worker: subprocess.Popen[bytes] | None = None
    log_path = tmp_path / "worker.log"
    try:
        await serve.start()
        await one_turn(serve, "We decided to ship on Friday.")
        waiting = "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo'"
        # The offload (every turn reaches its trigger here); one turn leaves the context no work.
        assert query("SELECT task_name FROM procrastinate_jobs WHERE status = 'todo'") == [
            ("chorus.memory.offload",)
        ]
        assert query("SELECT count(*) FROM memory_cursors") == [(0,)]
        environ = {key: value for key, value in os.environ.items() if not key.startswith("CHORUS_")}
        environ.update(settings, CHORUS_CONFIG=str(tmp_path / "none.yaml"), CHORUS_JOBS_WORKER="true")
        with log_path.open("ab") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "bot.cli", "worker"], cwd=REPO, env=environ, stdout=log, stderr=log
            )
        await wait_until(lambda: query("SELECT count(*) FROM memory_cursors") == [(1,)], what="the worker")
        await wait_until(lambda: query(waiting) == [(0,)], what="the queue to empty")
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, log_path.read_text()
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
        serve.kill()
        close()
