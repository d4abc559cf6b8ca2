"""A web visitor is the public: read-only tools only, so the filesystem server's write tool is
refused and nothing is written; members may write; an `ask` tool is refused as needing approval."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.tools.mcp_support import npm_server
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


async def test_a_member_writes_the_file(fake_openai: FakeOpenAI, runtimes: Any, tmp_path: Path) -> None:
    folder, events = await visitor_asks_to_write(
        runtimes, tmp_path, fake_openai, channels_web_access_strangers="members"
    )

    assert (folder / "note.txt").read_text() == "hello"
    assert tool_steps(events) == [("fs__write_file", "started"), ("fs__write_file", "done")]


async def test_a_tool_the_policy_asks_about_is_offered_but_not_run_until_approvals_exist(
    fake_openai: FakeOpenAI, runtimes: Any, tmp_path: Path
) -> None:
    folder, events = await visitor_asks_to_write(
        runtimes,
        tmp_path,
        fake_openai,
        channels_web_access_strangers="public",
        tools_approve={"fs__write_*": {"public": "ask"}},
    )

    assert not (folder / "note.txt").exists()
    assert "fs__write_file" in offered_names(fake_openai)
    assert "needs approval" in last_result_sent(fake_openai)
    assert tool_steps(events)[-1] == ("fs__write_file", "error")
