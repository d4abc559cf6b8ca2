"""Every message reaches memory: recorded group messages, long backlogs, imports."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bot.cli import main as chorus
from bot.runtime import Runtime
from bot.storage.memory_store import MemoryStore
from bot.storage.owners import Owner
from tests.support.runtime import inbound, make_runtime

GROUP = {"chat_id": "g7", "chat_kind": "group"}
FACTS = [
    "I adopted a rescue {thing} named {name}.",
    "My sister moved to {name} to study {thing} design.",
    "We decided to name the {thing} after {name}.",
    "I finished a {thing} course taught by {name}.",
]
NAMES = [
    "Biscuit",
    "Lisbon",
    "Mochi",
    "Oslo",
    "Pepper",
    "Quito",
    "Rosa",
    "Sable",
    "Tango",
    "Umber",
    "Vera",
    "Willow",
    "Xeno",
    "Yara",
    "Zuri",
]
THINGS = ["dog", "kite", "boat", "lamp", "harp", "quilt", "vase", "drum", "bike", "clock"]


def fact(n: int) -> str:
    """A distinct stated fact for every n (no two are near-duplicates)."""
    return FACTS[n % len(FACTS)].format(name=f"{NAMES[n % len(NAMES)]}{n}", thing=THINGS[n % len(THINGS)])


def group_owner(runtime: Runtime) -> Owner:
    return Owner("group", "web:g7")


async def test_recorded_group_messages_are_offloaded_by_the_step_trigger(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, memory_idle_seconds=0)
    try:
        for n in range(20):  # memory.steps_threshold: twenty stored messages
            reply = await runtime.engine.record(inbound(fact(n), user_id=f"u{n % 3}", **GROUP))
            assert reply.kind == "recorded"
        await runtime.engine.drain()
        items = MemoryStore(runtime.database).all_items(group_owner(runtime))
        assert len(items) == 20
        assert {item.source_seq for item in items} == set(range(1, 21))
    finally:
        await runtime.aclose()


async def test_recorded_group_messages_below_a_trigger_are_flushed_when_the_group_goes_idle(
    tmp_path: Path,
) -> None:
    runtime = make_runtime(tmp_path, memory_idle_seconds=0.2)
    try:
        await runtime.engine.record(inbound("I adopted a rescue dog named Biscuit last spring.", **GROUP))
        await runtime.engine.drain()
        memory = MemoryStore(runtime.database)
        deadline = asyncio.get_running_loop().time() + 60
        while not memory.all_items(group_owner(runtime)):
            assert asyncio.get_running_loop().time() < deadline, "the idle flush never ran"
            await asyncio.sleep(0.05)
        assert "Biscuit" in memory.all_items(group_owner(runtime))[0].content
    finally:
        await runtime.aclose()


async def test_a_long_backlog_is_offloaded_in_chunks_until_the_cursor_catches_up(
    runtimes, tmp_path: Path
) -> None:
    # Memory off while the group talks (as with a bot added to a busy group), then on.
    quiet = runtimes(tmp_path, memory_enabled=False)
    for n in range(300):
        await quiet.engine.record(inbound(fact(n), user_id=f"u{n % 3}", **GROUP))
    runtime = runtimes(tmp_path, memory_idle_seconds=0)
    try:
        reply = await runtime.engine.respond(inbound("what did we decide?", was_mentioned=True, **GROUP))
        await runtime.engine.drain()
        memory = MemoryStore(runtime.database)
        items = memory.all_items(group_owner(runtime))
        # Every message carries a fact; far more than one distillation's 40 items survive.
        assert {item.source_seq for item in items} >= set(range(1, 301))
        cursor = memory.cursor(reply.session_id or "")
        assert cursor is not None and cursor.last_seq >= 300 and cursor.offloads >= 15
    finally:
        await runtime.aclose()


def test_chorus_import_distils_the_imported_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def converse() -> str:
        runtime = make_runtime(tmp_path, memory_enabled=False)
        try:
            for n in range(5):
                await runtime.engine.record(inbound(fact(n), **GROUP))
            return runtime.stores.sessions.list_sessions()[0][0].id
        finally:
            await runtime.aclose()

    session_id = asyncio.run(converse())
    monkeypatch.setenv("CHORUS_DATABASE_URL", f"sqlite:///{tmp_path / 'chorus.db'}")
    monkeypatch.setenv("CHORUS_DATA_DIR", str(tmp_path / "data"))
    config = str(Path(__file__).resolve().parents[2] / "config.yaml")
    exported = tmp_path / "export.json"
    assert chorus(["--config", config, "export", session_id, "--format", "json", "-o", str(exported)]) == 0
    assert chorus(["--config", config, "import", str(exported)]) == 0
    printed = capsys.readouterr().out
    assert "Distilled 5 memory items" in printed
    imported = printed.split("Imported as session ")[1].split()[0]
    assert chorus(["--config", config, "recall", imported, "Biscuit0", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits and "Biscuit" in hits[0]["text"]
