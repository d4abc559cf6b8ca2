"""The recall tool searches what /recall searches, and the demo model's replies stay out of memory."""

from __future__ import annotations

import json
from pathlib import Path

from bot.runtime import Runtime
from bot.storage.owners import Owner
from tests.support.runtime import inbound, make_runtime


async def test_the_recall_tool_finds_what_was_just_said_and_says_it_is_in_the_conversation(
    tmp_path: Path,
) -> None:
    # The README's first steps: say something, then ask the demo model about it.
    runtime = make_runtime(tmp_path, memory_idle_seconds=0)
    try:
        await runtime.engine.respond(inbound("My favourite fruits are mangoes and figs."))
        recalled = await runtime.engine.respond(inbound("what did I say about fruits?"))
        ((session, _),) = runtime.stores.sessions.list_sessions()
        command = await runtime.engine.respond(inbound("/recall fruits"))
    finally:
        await runtime.aclose()

    assert "mangoes and figs" in command.text
    assert "found nothing" not in recalled.text
    assert "still in our conversation, message #1" in recalled.text
    assert "mangoes and figs" in recalled.text
    result = next(row for row in runtime.stores.messages.messages(session.id) if row.kind == "tool_result")
    answer = json.loads(result.content)
    assert answer["hits"][0]["in_context"] is True and "already above" in answer["note"]


async def test_the_demo_models_replies_never_become_memory_items(tmp_path: Path) -> None:
    runtime: Runtime = make_runtime(tmp_path, memory_idle_seconds=0)
    try:
        await runtime.engine.respond(inbound("I have decided to learn the cello next year."))
        await runtime.engine.respond(inbound("how full is your context?"))
        ((session, _),) = runtime.stores.sessions.list_sessions()
        assert runtime.memory is not None
        await runtime.memory.flush(session)
        items = runtime.stores.memory.all_items(Owner.of(session))
    finally:
        await runtime.aclose()

    assert len(items) == 1 and items[0].content.startswith("Alice: I have decided to learn the cello")
    assert not any("[demo]" in item.content or "context holds" in item.content for item in items)
