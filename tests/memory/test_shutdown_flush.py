"""The memory flush at shutdown: what active sessions have pending is offloaded, within a deadline."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from bot.jobs.definitions import FLUSH_IDLE_MEMORY
from bot.runtime import Runtime
from bot.storage.jobs import SqliteJobs
from bot.storage.memory_store import MemoryStore
from bot.storage.owners import Owner
from tests.fakes.openai_server import FakeOpenAI, Hang
from tests.support.runtime import inbound, make_runtime

DEADLINE = 60.0
# No trigger is reached after a turn: only an idle timer or the shutdown offloads.
QUIET = {
    "memory_idle_seconds": 600,
    "memory_turns_threshold": 1000,
    "memory_chars_threshold": 1_000_000,
    "memory_steps_threshold": 1000,
}


async def talk(runtime: Runtime, *people: str) -> list[Owner]:
    """Each person states a fact in their own private chat; the owners of their memory."""
    owners = []
    for person in people:
        reply = await runtime.engine.respond(
            inbound(f"I adopted a rescue dog named {person}Dog.", user_id=person)
        )
        session = runtime.stores.sessions.get_session(reply.session_id or "")
        assert session is not None
        owners.append(Owner.of(session))
    await runtime.engine.drain()
    return owners


async def test_shutdown_offloads_what_active_sessions_have_pending(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, **QUIET)
    memory = MemoryStore(runtime.database)
    try:
        owners = await talk(runtime, "ana", "bo")
        assert memory.all_items(owners[0]) == []
    finally:
        await asyncio.wait_for(runtime.aclose(), DEADLINE)
    reopened = make_runtime(tmp_path, **QUIET)
    try:
        for person, owner in zip(("ana", "bo"), owners, strict=True):
            (item,) = MemoryStore(reopened.database).all_items(owner)
            assert f"{person}Dog" in item.content
    finally:
        await reopened.aclose()


async def test_the_flush_stops_at_its_deadline_and_leaves_the_rest_to_the_idle_timer(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    runtime = make_runtime(
        tmp_path, model_base_url=fake_openai.base_url, memory_shutdown_flush_seconds=0.5, **QUIET
    )
    try:
        owners = await talk(runtime, "ana", "bo")
        # The model that distils each session at shutdown never answers.
        fake_openai.script(Hang(seconds=10 * DEADLINE), Hang(seconds=10 * DEADLINE))
    finally:
        # Without the deadline this waits for the model for ever.
        await asyncio.wait_for(runtime.aclose(), DEADLINE)
    reopened = make_runtime(tmp_path, model_base_url=fake_openai.base_url, **QUIET)
    try:
        for owner in owners:
            assert MemoryStore(reopened.database).all_items(owner) == []
        # Each session's idle flush is still waiting in the jobs table for the next start.
        assert SqliteJobs(reopened.database).count(names=[FLUSH_IDLE_MEMORY]) == 2
    finally:
        await reopened.aclose()


async def test_an_unreachable_model_at_shutdown_is_one_line_per_session_and_the_cursor_stays(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeOpenAI() as server:
        runtime = make_runtime(tmp_path, model_base_url=server.base_url, model_max_retries=0, **QUIET)
        owners = await talk(runtime, "ana", "bo")
        sessions = [session.id for session, _ in runtime.stores.sessions.list_sessions()]
    # The model server is gone: each session's flush at shutdown finds nobody at the address.
    with caplog.at_level(logging.INFO):
        await asyncio.wait_for(runtime.aclose(), DEADLINE)
    flush_lines = [record for record in caplog.records if record.name.startswith("bot.memory")]
    assert len(flush_lines) == 2, [record.getMessage() for record in flush_lines]
    for record in flush_lines:
        message = record.getMessage()
        assert record.levelno == logging.WARNING and record.exc_info is None and "\n" not in message
        assert "could not connect" in message and "cursor" in message
    assert {
        session_id for session_id in sessions if any(session_id in r.getMessage() for r in flush_lines)
    } == set(sessions)

    # Nothing was lost: the cursors did not move, and the next start offloads what was pending.
    reopened = make_runtime(tmp_path, **QUIET)
    try:
        memory = MemoryStore(reopened.database)
        assert [memory.cursor_seq(session_id) for session_id in sessions] == [None, None]
        assert SqliteJobs(reopened.database).count(names=[FLUSH_IDLE_MEMORY]) == 2
        for session_id in sessions:
            session = reopened.stores.sessions.get_session(session_id)
            assert session is not None and reopened.memory is not None
            await reopened.memory.flush(session)
        for person, owner in zip(("ana", "bo"), owners, strict=True):
            assert any(f"{person}Dog" in item.content for item in memory.all_items(owner))
    finally:
        await reopened.aclose()
