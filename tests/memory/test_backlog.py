"""When memory is behind the conversation: `chorus recall` says so, and the flush at shutdown ends in time."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.cli import main as chorus
from bot.memory.dense import load_embedder
from bot.storage.memory_store import MemoryStore
from bot.storage.owners import Owner
from bot.storage.sessions import SessionStore
from tests.support.runtime import inbound, make_runtime

CONFIG = str(Path(__file__).resolve().parents[2] / "config.yaml")


def recall_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session_id: str, dense: bool) -> None:
    monkeypatch.setenv("CHORUS_DATABASE_URL", f"sqlite:///{tmp_path / 'chorus.db'}")
    monkeypatch.setenv("CHORUS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CHORUS_MEMORY_DENSE", "true" if dense else "false")
    assert chorus(["--config", CONFIG, "recall", session_id, "picnic"]) == 0


def test_chorus_recall_says_how_many_messages_memory_has_not_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def talk() -> str:
        runtime = make_runtime(tmp_path, memory_turns_threshold=2, memory_idle_seconds=0, memory_dense=False)
        try:
            for text in ("We decided on the lighthouse trail for the picnic.", "Bring the blue blanket."):
                reply = await runtime.engine.respond(inbound(text))
                await runtime.engine.drain()
            # One more turn than the offload's trigger takes: its two messages wait.
            reply = await runtime.engine.respond(inbound("The picnic starts at noon."))
            await runtime.engine.drain()
            return reply.session_id or ""
        finally:
            await runtime.aclose()

    session_id = asyncio.run(talk())
    recall_in(tmp_path, monkeypatch, session_id, dense=False)
    printed = capsys.readouterr()
    assert "picnic" in printed.out
    assert "Memory is behind: 2 messages in conversation not offloaded yet" in printed.err


def test_chorus_recall_says_nothing_when_memory_is_up_to_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def talk() -> str:
        runtime = make_runtime(tmp_path, memory_turns_threshold=1, memory_idle_seconds=0, memory_dense=False)
        try:
            reply = await runtime.engine.respond(
                inbound("We decided on the lighthouse trail for the picnic.")
            )
            await runtime.engine.drain()
            return reply.session_id or ""
        finally:
            await runtime.aclose()

    session_id = asyncio.run(talk())
    recall_in(tmp_path, monkeypatch, session_id, dense=False)
    assert "Memory is behind" not in capsys.readouterr().err


@pytest.mark.skipif(load_embedder() is None, reason="the dense extra's model package is not installed")
def test_the_flush_at_shutdown_stores_memory_and_leaves_the_vectors_to_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def talk() -> str:
        runtime = make_runtime(
            tmp_path, memory_turns_threshold=50, memory_idle_seconds=600, memory_dense=True
        )
        try:
            for text in ("We decided on the lighthouse trail for the picnic.", "Bring the blue blanket."):
                reply = await runtime.engine.respond(inbound(text))
                await runtime.engine.drain()
            return reply.session_id or ""
        finally:
            await runtime.aclose()

    session_id = asyncio.run(talk())
    memory = MemoryStore(make_runtime(tmp_path, memory_dense=True).database)
    session = SessionStore(memory.database).get_session(session_id)
    assert session is not None
    cursor = memory.cursor(session_id)
    # Distilled and stored by the flush, every message passed; nothing embedded yet.
    assert cursor is not None and cursor.last_seq == 4
    assert memory.all_items(Owner.of(session))
    assert memory.vector_counts(Owner.of(session)) == {"memory": (0, 0), "message": (0, 0)}
    recall_in(tmp_path, monkeypatch, session_id, dense=True)
    assert "Memory is behind: 4 offloaded messages without a vector" in capsys.readouterr().err

    async def start_again() -> object:
        runtime = make_runtime(tmp_path, memory_dense=True)
        try:
            assert runtime.memory is not None
            task = runtime.memory.start_backfill()
            assert task is not None
            return await task
        finally:
            await runtime.aclose()

    # The next start's background pass embeds them.
    result = asyncio.run(start_again())
    assert getattr(result, "messages", None) == 4
