"""Each speaker's own memory: items say whom they are about and who said them, the snapshot and
recall attribute them in a group, and `chorus memory` lists and forgets one person's items."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.cli import main as chorus
from bot.memory.recall import format_hit, hit_record
from bot.runtime import Runtime
from bot.storage.owners import Owner
from tests.support.runtime import inbound, make_runtime

GROUP = {"chat_id": "crew", "chat_kind": "group"}
OWNER = Owner("group", "web:crew")


async def remember_two_people(runtime: Runtime) -> None:
    """Alice privately, then Alice and Bob in a group; the web lane's account ids are web:<user>."""
    await runtime.engine.respond(inbound("I decided to learn the cello this winter.", user_id="alice"))
    for who, text in (
        ("Alice", "I have been living in Lisbon for almost five years now."),
        ("Bob", "I decided to bring the cake on Saturday."),
        ("Bob", "Alice told me she is allergic to walnuts, we must remember that."),
    ):
        await runtime.engine.record(inbound(text, user_id=who.lower(), display_name=who, **GROUP))
    await runtime.engine.drain()
    assert runtime.memory is not None
    for session, _ in runtime.stores.sessions.list_sessions():
        await runtime.memory.flush(session)


async def test_group_items_are_attributed_in_the_snapshot_and_in_recall(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, memory_idle_seconds=0)
    try:
        await remember_two_people(runtime)
        assert runtime.memory is not None
        group = next(s for s, _ in runtime.stores.sessions.list_sessions() if s.owner_kind == "group")
        snapshot = runtime.memory.recall.snapshot_only(group).snapshot
        hits = runtime.memory.recall.search(OWNER, "cake", 3)
        items = runtime.stores.memory.all_items(OWNER)
        alice = runtime.stores.identities.find_account("web", "alice")
    finally:
        await runtime.aclose()

    assert alice is not None
    lisbon = next(item for item in items if "Lisbon" in item.content)
    assert (lisbon.about, lisbon.said_by, lisbon.said_by_name) == ("Alice", alice.person_id, "Alice")
    # Every line of the group's snapshot names its person.
    assert snapshot.splitlines() and all(
        line.startswith(("- [fact] Alice:", "- [decision] Bob:", "- [fact] Bob:", "- [constraint] Bob:"))
        for line in snapshot.splitlines()
    )
    assert "cello" not in snapshot  # Alice's private memory
    cake = next(hit for hit in hits if "cake" in hit.text)
    assert format_hit(cake).endswith("Bob: I decided to bring the cake on Saturday.")
    assert hit_record(cake)["speaker"] == "Bob"


def test_chorus_memory_lists_and_forgets_one_persons_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def remember() -> None:
        runtime = make_runtime(tmp_path, memory_idle_seconds=0)
        try:
            await remember_two_people(runtime)
        finally:
            await runtime.aclose()

    asyncio.run(remember())
    monkeypatch.setenv("CHORUS_DATABASE_URL", f"sqlite:///{tmp_path / 'chorus.db'}")
    monkeypatch.setenv("CHORUS_DATA_DIR", str(tmp_path / "data"))
    config = str(Path(__file__).resolve().parents[2] / "config.yaml")

    assert chorus(["--config", config, "memory", "list", "web:alice"]) == 0
    listed = capsys.readouterr().out
    assert "private" in listed and "cello" in listed
    assert "group web:crew" in listed and "Lisbon" in listed
    assert "cake" not in listed  # Bob's

    assert chorus(["--config", config, "memory", "forget", "web:alice"]) == 0
    assert capsys.readouterr().out.startswith("Forgot ")
    assert chorus(["--config", config, "memory", "list", "web:alice"]) == 0
    assert capsys.readouterr().out.startswith("Nothing remembered of person")
    assert chorus(["--config", config, "memory", "list", "web:bob"]) == 0
    assert "cake" in capsys.readouterr().out
    assert chorus(["--config", config, "memory", "list", "web:nobody"]) == 2
