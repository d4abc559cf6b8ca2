"""The database boundary: which threads run store calls, in what order, and what a cancelled caller sees."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine as DatabaseEngine

from bot.loop_lag import LoopLagProbe
from bot.storage.boundary import THREAD_NAME, DatabaseBoundary, boundary_for, threads_for
from bot.storage.database import create_database_engine


def sqlite_engine(tmp_path: Path) -> DatabaseEngine:
    return create_database_engine(f"sqlite:///{tmp_path / 'chorus.db'}")


async def settle() -> None:
    """Let every task that is ready run (a cancellation is delivered in the next loop step)."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_sqlite_has_one_database_thread_that_runs_calls_in_order(tmp_path: Path) -> None:
    database = sqlite_engine(tmp_path)
    boundary = DatabaseBoundary(database)
    try:
        ran: list[tuple[int, str]] = []

        def call(number: int) -> int:
            ran.append((number, threading.current_thread().name))
            return number * 2

        results = await asyncio.gather(*(boundary.run(call, number) for number in range(50)))
    finally:
        boundary.close()
        database.dispose()
    assert boundary.workers == 1
    assert results == [number * 2 for number in range(50)]
    assert [number for number, _ in ran] == list(range(50))
    assert {name for _, name in ran} == {f"{THREAD_NAME}_0"}
    assert threading.main_thread().name not in {name for _, name in ran}


def test_postgresql_gets_a_thread_per_pooled_connection() -> None:
    # No connection is made: the pool's size is configuration.
    database = create_engine("postgresql+psycopg://chorus@127.0.0.1:1/none", pool_size=7)
    assert threads_for(database) == 7
    assert threads_for(create_engine("postgresql+psycopg://chorus@127.0.0.1:1/none")) == 5


def test_one_boundary_per_database(tmp_path: Path) -> None:
    database = sqlite_engine(tmp_path)
    other = create_database_engine(f"sqlite:///{tmp_path / 'other.db'}")
    assert boundary_for(database) is boundary_for(database)
    assert boundary_for(database) is not boundary_for(other)


async def test_a_cancelled_caller_hears_of_it_only_after_its_call_finished(tmp_path: Path) -> None:
    database = sqlite_engine(tmp_path)
    boundary = DatabaseBoundary(database)
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def slow_write() -> None:
        started.set()
        release.wait(60)
        finished.append("write")

    def next_write() -> None:
        finished.append("next")

    try:
        caller = asyncio.create_task(boundary.run(slow_write))
        await asyncio.to_thread(started.wait, 60)
        caller.cancel()
        # The caller stays inside `run` while the write runs, however often it is cancelled.
        await settle()
        caller.cancel()
        await settle()
        assert not caller.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert finished == ["write"]
        # What the caller does next comes after its write.
        await boundary.run(next_write)
        assert finished == ["write", "next"]
    finally:
        release.set()
        boundary.close()
        database.dispose()


async def test_a_queued_call_still_runs_when_its_caller_is_cancelled(tmp_path: Path) -> None:
    database = sqlite_engine(tmp_path)
    boundary = DatabaseBoundary(database)
    release = threading.Event()
    ran: list[str] = []
    try:
        blocker = asyncio.create_task(boundary.run(release.wait, 60))
        queued = asyncio.create_task(boundary.run(ran.append, "queued write"))
        await settle()
        queued.cancel()
        await settle()
        release.set()
        await blocker
        with pytest.raises(asyncio.CancelledError):
            await queued
        assert ran == ["queued write"]
    finally:
        release.set()
        boundary.close()
        database.dispose()


async def test_errors_of_a_call_reach_its_caller(tmp_path: Path) -> None:
    database = sqlite_engine(tmp_path)
    boundary = DatabaseBoundary(database)

    def broken() -> None:
        raise ValueError("no such row")

    try:
        with pytest.raises(ValueError, match="no such row"):
            await boundary.run(broken)
    finally:
        boundary.close()
        database.dispose()


def test_loop_lag_probe_reports_p99_and_the_longest_stall(caplog: pytest.LogCaptureFixture) -> None:
    probe = LoopLagProbe()
    for _ in range(990):
        probe.record(0.001)
    for _ in range(9):
        probe.record(0.02)
    with caplog.at_level(logging.WARNING, logger="bot.loop_lag"):
        probe.record(0.3)
    summary = probe.summary()
    assert summary.startswith("event loop stalls: p99 20.0 ms, max 300.0 ms over 1000 samples")
    assert "event loop stalled for 300 ms" in caplog.text
    # Samples are kept by millisecond, not one by one: a long run stays small.
    assert len(probe.stalls) == 3


async def test_loop_lag_probe_sees_a_blocked_loop_and_stops_sampling_when_stopped() -> None:
    probe = LoopLagProbe()
    probe.start()
    await asyncio.sleep(0.05)
    time.sleep(0.08)  # the loop is blocked: the probe's timer, due within 10 ms, runs late
    await asyncio.sleep(0.05)
    await probe.stop()
    assert max(probe.stalls) >= 60
    samples = probe.stalls.total()
    await asyncio.sleep(0.05)
    assert probe.stalls.total() == samples


async def test_close_runs_the_queued_calls_and_a_later_call_starts_new_threads(tmp_path: Path) -> None:
    database = sqlite_engine(tmp_path)
    boundary = DatabaseBoundary(database)
    release = threading.Event()
    ran: list[int] = []
    try:
        worker = await boundary.run(threading.current_thread)
        blocker = asyncio.create_task(boundary.run(release.wait, 60))
        queued = [asyncio.create_task(boundary.run(ran.append, number)) for number in range(3)]
        await settle()
        closing = asyncio.create_task(asyncio.to_thread(boundary.close))
        await settle()
        release.set()
        await asyncio.wait_for(closing, 60)
        # close() returned only once every call handed over before it had run.
        assert ran == [0, 1, 2]
        await blocker
        await asyncio.gather(*queued)
        assert not worker.is_alive()
        again = await boundary.run(threading.current_thread)
        assert again is not worker and again.name == f"{THREAD_NAME}_0"
    finally:
        release.set()
        boundary.close()
        database.dispose()
