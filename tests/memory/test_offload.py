"""Triggers, the cursor (exactly-once offload), de-duplication across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from bot.errors import ProviderUnavailable
from bot.runtime import Runtime
from bot.storage.memory_store import MemoryStore
from bot.storage.message_append import NewMessage
from bot.storage.owners import Owner
from tests.memory.support import FlakyDistiller, exchange, offloader
from tests.support.runtime import make_runtime


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    return make_runtime(tmp_path, memory_idle_seconds=0)


def items_of(runtime: Runtime, owner_id: str = "p1") -> list[tuple[str, str]]:
    stored = MemoryStore(runtime.database).all_items(Owner("person", owner_id))
    return [(item.kind, item.content) for item in stored]


async def test_turns_trigger_an_offload_and_nothing_before(runtime: Runtime) -> None:
    session = runtime.stores.sessions.create_session("private", "person", "p1", "ada")
    memory = offloader(runtime, turns_threshold=2)
    exchange(runtime, session, "We decided to use Redis for sessions.", "Noted.")
    assert await memory.offload(session) is None
    assert memory.pending(session.id).turns == 1
    exchange(runtime, session, "You must never store passwords in plain text.", "Agreed.")
    result = await memory.offload(session)
    assert result is not None
    assert (result.messages, result.written, result.merged, result.deduped) == (4, 2, 0, 0)
    assert items_of(runtime) == [
        ("decision", "Alice: We decided to use Redis for sessions."),
        ("constraint", "Alice: You must never store passwords in plain text."),
    ]
    assert memory.pending(session.id).any is False
    assert await memory.offload(session, force=True) is None


async def test_characters_and_steps_trigger_too(runtime: Runtime) -> None:
    by_chars = runtime.stores.sessions.create_session("private", "person", "p1", "ada")
    memory = offloader(runtime, chars_threshold=60, steps_threshold=100)
    exchange(runtime, by_chars, "We decided to host everything in Frankfurt for latency.", "Okay.")
    assert (await memory.offload(by_chars)) is not None

    group = runtime.stores.sessions.create_session("group", "group", "web:g1", "ada")
    memory = offloader(runtime, steps_threshold=3)
    for n in range(2):
        runtime.stores.messages.append(group.id, NewMessage(role="user", content=f"hi {n}", token_count=1))
    assert await memory.offload(group) is None  # 2 steps, no turn answered yet
    runtime.stores.messages.append(group.id, NewMessage(role="user", content="hi 2", token_count=1))
    assert memory.pending(group.id).steps == 3
    assert (await memory.offload(group)) is not None


async def test_code_does_not_count_towards_characters(runtime: Runtime) -> None:
    session = runtime.stores.sessions.create_session("private", "person", "p1", "ada")
    code = "```\n" + "x = 1\n" * 500 + "```"
    runtime.stores.messages.append(session.id, NewMessage(role="user", content=code + "\nok", token_count=1))
    assert offloader(runtime).pending(session.id).chars == 2


async def test_a_failing_distiller_leaves_the_cursor_and_every_message_is_offloaded_once(
    runtime: Runtime,
) -> None:
    session = runtime.stores.sessions.create_session("private", "person", "p1", "ada")
    distiller = FlakyDistiller(failures=1)
    memory = offloader(runtime, distiller, turns_threshold=1)
    exchange(runtime, session, "We decided to use Redis for sessions.", "Noted.")
    with pytest.raises(ProviderUnavailable):
        await memory.offload(session)
    assert MemoryStore(runtime.database).cursor(session.id) is None
    assert items_of(runtime) == []
    exchange(runtime, session, "You must never store passwords in plain text.", "Agreed.")
    await memory.offload(session)
    exchange(runtime, session, "It turns out the outage came from an expired certificate.", "Yes.")
    await memory.offload(session)
    # The failed chunk was offered again, then the next one (each one turn long, the
    # trigger); after success no seq is sent twice.
    assert distiller.calls == [[1, 2], [1, 2], [3, 4], [5, 6]]
    assert [kind for kind, _ in items_of(runtime)] == ["decision", "constraint", "conclusion"]
    cursor = MemoryStore(runtime.database).cursor(session.id)
    assert cursor is not None and (cursor.last_seq, cursor.offloads, cursor.written) == (6, 3, 3)


async def test_a_transcript_changed_under_the_cursor_resets_it_without_duplicates(
    runtime: Runtime,
) -> None:
    session = runtime.stores.sessions.create_session("private", "person", "p1", "ada")
    memory = offloader(runtime, turns_threshold=1)
    exchange(runtime, session, "We decided to use Redis for sessions.", "Noted.")
    await memory.offload(session)
    # The message under the cursor is no longer the one that was offloaded.
    with runtime.database.begin() as connection:
        connection.execute(
            text("UPDATE messages SET content = 'Replaced.' WHERE session_id = :s AND seq = 2"),
            {"s": session.id},
        )
    exchange(runtime, session, "You must never store passwords in plain text.", "Agreed.")
    result = await memory.offload(session)
    assert result is not None and result.reset and result.messages == 4
    assert (result.written, result.deduped) == (1, 1)
    assert [kind for kind, _ in items_of(runtime)] == ["decision", "constraint"]


async def test_duplicates_are_skipped_across_restarts_and_old_repeats_merge(runtime: Runtime) -> None:
    first = runtime.stores.sessions.create_session("private", "person", "p1", "ada")
    exchange(runtime, first, "We decided to use Redis for the session cache.", "Noted.")
    await offloader(runtime, turns_threshold=1).offload(first)

    # A new process (new offloader), a new session of the same person, a reworded repeat.
    second = runtime.stores.sessions.create_session("private", "person", "p1", "ada")
    exchange(runtime, second, "We decided to use Redis for the session cache!", "Noted.")
    result = await offloader(runtime, turns_threshold=1).offload(second)
    assert result is not None and (result.written, result.merged, result.deduped) == (0, 0, 1)

    # Beyond the recent window an exact repeat reinforces the stored item instead.
    exchange(runtime, second, "You must never store passwords in plain text.", "Agreed.")
    exchange(runtime, second, "We decided to use Redis for the session cache.", "Noted.")
    result = await offloader(runtime, turns_threshold=1, recent_window=0).offload(second)
    assert result is not None and (result.written, result.merged, result.deduped) == (1, 1, 0)
    stored = MemoryStore(runtime.database).all_items(Owner("person", "p1"))
    assert [(item.kind, item.mentions) for item in stored] == [("decision", 2), ("constraint", 1)]
    # The last offload took two chunks, one turn each.
    assert MemoryStore(runtime.database).totals(Owner("person", "p1")) == {
        "offloads": 4,
        "written": 2,
        "merged": 1,
        "deduped": 1,
    }


async def test_tagged_replies_bypass_distillation(runtime: Runtime) -> None:
    session = runtime.stores.sessions.create_session("private", "person", "p1", "ada")
    distiller = FlakyDistiller(failures=0)
    exchange(
        runtime,
        session,
        "ok",
        "Done, I switched the build.\n"
        "<memory>\n- 决策：用 pnpm 替代 npm\n- 结论：接下来我要确认缓存\n</memory>",
    )
    result = await offloader(runtime, distiller, turns_threshold=1).offload(session)
    assert result is not None and result.written == 2
    assert items_of(runtime) == [("decision", "用 pnpm 替代 npm"), ("fact", "接下来我要确认缓存")]
    assert distiller.calls == [[1]]  # only the untagged user message went to the distiller
