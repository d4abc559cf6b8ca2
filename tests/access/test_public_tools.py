"""A web visitor is the public: read-only tools only, so the filesystem server's write tool is
refused and nothing is written; a member's write waits for a yes (none in time: not written);
a public visitor's call the operator lets `ask` waits for an admin's yes, not the visitor's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.turns.approvals import EXPIRED_RESULT
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.tools.mcp_support import npm_server
from tests.tools.test_approvals import approval_id, turn
from tests.tools.test_mcp_turns import answer, last_result_sent, started_runtime, tool_steps, web_visitor


def write_note(folder: Path) -> ToolCalls:
    return ToolCalls([("fs__write_file", {"path": str(folder / "note.txt"), "content": "hello"})])


async def visitor_asks_to_write(
    runtimes: Any, tmp_path: Path, model: FakeOpenAI, **settings: Any
) -> tuple[Path, list[Any]]:
    folder = tmp_path / "files"
    folder.mkdir()
    model.script(write_note(folder), "Done what I could.")
    runtime = await started_runtime(
        runtimes, tmp_path, model, settings, fs=npm_server("filesystem", str(folder))
    )
    async with web_visitor(runtime) as visitor:
        events = await visitor.say("Write hello into note.txt.")
    return folder, events


def offered_names(model: FakeOpenAI) -> set[str]:
    return {tool["function"]["name"] for tool in model.requests[0].json.get("tools", [])}


async def test_a_web_visitor_is_refused_the_write_tool_and_the_file_is_not_written(
    fake_openai: FakeOpenAI, runtimes: Any, tmp_path: Path
) -> None:
    folder, events = await visitor_asks_to_write(
        runtimes, tmp_path, fake_openai, channels_web_access_strangers="public"
    )

    assert not (folder / "note.txt").exists()
    assert tool_steps(events) == [("fs__write_file", "started"), ("fs__write_file", "error")]
    assert "no tool named 'fs__write_file'" in last_result_sent(fake_openai)
    # The public is offered the server's read-only tools, never its writing ones.
    offered = offered_names(fake_openai)
    assert "fs__read_text_file" in offered and "fs__write_file" not in offered
    assert answer(events)["text"] == "Done what I could."


async def test_a_members_write_waits_for_a_yes_and_none_in_time_writes_nothing(
    fake_openai: FakeOpenAI, runtimes: Any, tmp_path: Path
) -> None:
    folder, events = await visitor_asks_to_write(
        runtimes, tmp_path, fake_openai, channels_web_access_strangers="members", tools_approval_seconds=0.5
    )

    assert not (folder / "note.txt").exists()
    assert tool_steps(events) == [
        ("fs__write_file", "started"),
        ("fs__write_file", "asked"),
        ("fs__write_file", "denied"),
    ]
    assert EXPIRED_RESULT in last_result_sent(fake_openai)


async def test_a_public_visitors_ask_waits_for_an_admins_yes_not_the_visitors(
    fake_openai: FakeOpenAI, runtimes: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    fake_openai.script(write_note(folder), "Written.")
    settings = {
        "channels_web_access_strangers": "public",
        "channels_telegram_access_admins": ["42"],
        "tools_approve": {"fs__write_*": {"public": "ask"}},
    }
    runtime = await started_runtime(
        runtimes, tmp_path, fake_openai, settings, fs=npm_server("filesystem", str(folder))
    )

    async with turn(runtime, "Write hello into note.txt.") as running:
        asked = await running.asked()
        own = await runtime.engine.approvals.decide(approval_id(asked), True, "web:u1")
        assert not own.ok and not (folder / "note.txt").exists()
        assert (await runtime.engine.approvals.decide(approval_id(asked), True, "telegram:42")).ok
        reply = await running.reply()

    assert "fs__write_file" in offered_names(fake_openai)
    assert reply.text == "Written."
    assert (folder / "note.txt").read_text() == "hello"
