"""`chorus chat` in a real terminal (a pty, through pexpect), and fed by a pipe.

In a terminal: lines are edited (the Up arrow recalls them, in later runs too), Ctrl-C
stops a streaming reply or clears the line, Ctrl-D leaves, and replies are rendered as
Markdown. Fed by a pipe: the plain lines scripts read. Either way the log goes to a file.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest

from bot.providers.base import ChatRequest, Finish, ModelEvent, TextDelta
from channels.terminal import chat_loop
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCalls
from tests.support.failures import (
    FAILED_TEXT,
    assert_contained,
    assert_tool_failure_answered,
    install_broken_tool,
)
from tests.support.runtime import REPO_CONFIG, RuntimeFactory, make_runtime
from tests.support.terminal import CTRL_C, CTRL_D, PROMPT, ROOT, UP, ChatTerminal, chat_environment

MARKDOWN_REPLY = (
    "## Fruits\n\nSome **bold** words and `a snippet`.\n\n"
    "```python\nprint('a pear')\n```\n\n- apple\n- pear\n"
)


def model_environment(tmp_path: Path, server: FakeOpenAI) -> dict[str, str]:
    # Without memory: its distillation would be a request to the model stand-in too.
    return chat_environment(tmp_path, CHORUS_MODEL_BASE_URL=server.base_url, CHORUS_MEMORY_ENABLED="false")


def flat(text: str) -> str:
    """The screen's words with the terminal's line wrapping undone."""
    return " ".join(text.split())


def stored_texts(tmp_path: Path) -> list[str]:
    with sqlite3.connect(tmp_path / "chorus.db") as database:
        return [row[0] for row in database.execute("SELECT content FROM messages WHERE role = 'user'")]


def test_the_terminal_shows_the_conversation_and_the_log_goes_to_a_file(tmp_path: Path) -> None:
    terminal = ChatTerminal(chat_environment(tmp_path, CHORUS_LOG_LEVEL="INFO"))
    try:
        terminal.wait_for_prompt()
        terminal.type("hello there\r")
        terminal.wait_for_answer()
        terminal.wait_for_prompt()
        terminal.type("/help\r")
        terminal.wait_for("/recall QUERY")
        terminal.wait_for_prompt()
        terminal.type(CTRL_D)
        assert terminal.wait_for_exit() == 0
    finally:
        terminal.close()

    screen = terminal.screen
    assert "Chorus terminal chat" in screen and "You said: “hello there”" in flat(screen)
    # Warnings still reach the terminal (here: no model configured), INFO lines do not.
    assert "WARNING bot.runtime: No model configured" in screen
    assert " INFO " not in screen and "turn complete" not in screen
    log = (tmp_path / "data" / "chat.log").read_text(encoding="utf-8")
    assert "INFO bot.metrics" in log and "turn complete" in log


def test_the_up_arrow_recalls_the_last_line_and_the_history_survives_a_restart(tmp_path: Path) -> None:
    environment = chat_environment(tmp_path)
    first = ChatTerminal(environment)
    try:
        first.wait_for_prompt()
        first.type("my first line\r")
        first.wait_for_answer()
        first.wait_for_prompt()
        first.type(CTRL_D)
        assert first.wait_for_exit() == 0
    finally:
        first.close()

    again = ChatTerminal(environment)
    try:
        again.wait_for_prompt()
        again.type(UP)
        again.wait_for("my first line")
        again.type("\r")
        again.wait_for_answer()
        again.wait_for_prompt()
        again.type(CTRL_D)
        assert again.wait_for_exit() == 0
    finally:
        again.close()
    # The recalled line was sent as typed the first time: no escape sequence, no "^[[A".
    assert stored_texts(tmp_path) == ["my first line", "my first line"]
    assert "^[[A" not in again.screen


def test_ctrl_c_at_the_prompt_clears_the_line_and_the_chat_goes_on(tmp_path: Path) -> None:
    terminal = ChatTerminal(chat_environment(tmp_path))
    try:
        terminal.wait_for_prompt()
        terminal.type("half a thought")
        terminal.wait_for("half a thought")
        terminal.type(CTRL_C)
        terminal.type("/status\r")
        terminal.wait_for("Persona: Ada")
        terminal.wait_for_prompt()
        terminal.type(CTRL_D)
        assert terminal.wait_for_exit() == 0
    finally:
        terminal.close()
    assert stored_texts(tmp_path) == []
    assert "half a thought/status" not in terminal.screen


def test_ctrl_d_on_an_empty_line_leaves_with_status_zero(tmp_path: Path) -> None:
    terminal = ChatTerminal(chat_environment(tmp_path))
    try:
        terminal.wait_for_prompt()
        terminal.type(CTRL_D)
        assert terminal.wait_for_exit() == 0
    finally:
        terminal.close()
    assert "Traceback" not in terminal.screen


async def test_ctrl_c_stops_a_streaming_reply_and_the_prompt_comes_back(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    words = " ".join(f"word{number}" for number in range(1, 201))
    fake_openai.script(Reply(words, delay=0.1))
    terminal = ChatTerminal(model_environment(tmp_path, fake_openai))
    try:
        await terminal.wait_for_async(PROMPT)
        terminal.type("tell me a long story\r")
        await terminal.wait_for_async("word3 ")
        terminal.type(CTRL_C)
        await terminal.wait_for_async("[Stopped.]")
        await terminal.wait_for_async(PROMPT)
        terminal.type("and now?\r")
        await terminal.wait_for_async("reply to: and now?")
        await terminal.wait_for_async(PROMPT)
        terminal.type(CTRL_D)
        assert await terminal.wait_for_exit_async() == 0
    finally:
        terminal.close()
    # Stopped well before its end, and stored as stopped: the next turn was answered.
    assert "word200" not in terminal.screen


async def test_a_reply_is_rendered_as_markdown_in_a_terminal(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(MARKDOWN_REPLY)
    terminal = ChatTerminal(model_environment(tmp_path, fake_openai))
    try:
        await terminal.wait_for_async(PROMPT)
        terminal.type("fruits?\r")
        await terminal.wait_for_answer_async()
        await terminal.wait_for_async(PROMPT)
        terminal.type(CTRL_D)
        assert await terminal.wait_for_exit_async() == 0
    finally:
        terminal.close()
    reply = terminal.screen.split("Ada ─", 1)[1]
    # No Markdown marks are left, and what they marked is styled: bold, a highlighted code block.
    for mark in ("##", "**", "```", "`a snippet`", "- apple"):
        assert mark not in reply, mark
    assert "Fruits" in reply and "bold words" in reply and "print('a pear')" in reply and "• apple" in reply
    raw_reply = terminal.raw.split("Ada", 1)[1]
    assert re.search(r"\x1b\[(?:[0-9;]*;)?1m(?:\x1b\[[0-9;]*m)*bold", raw_reply), raw_reply
    assert re.search(r"\x1b\[[0-9;]+mprint\x1b\[0m\(", raw_reply), raw_reply


async def test_piped_into_chorus_chat_the_reply_is_plain_text(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(MARKDOWN_REPLY)
    environment = model_environment(tmp_path, fake_openai)
    chat = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "bot.cli", "--config", str(REPO_CONFIG), "chat", "--user", "Grace"),
        cwd=ROOT,
        env=environment,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(chat.communicate(b"fruits?\n"), 120)
    assert chat.returncode == 0
    shown = out.decode()
    # Exactly what scripts read: the prompt, the reply as the model wrote it, who spoke it.
    assert shown == (
        "Chorus terminal chat — /help for commands, Ctrl-D to leave.\n"
        f"{PROMPT}bot › {MARKDOWN_REPLY}\n  — Ada\n{PROMPT}\n"
    )


def test_the_demo_models_tool_calls_show_as_step_lines_before_the_answer(tmp_path: Path) -> None:
    terminal = ChatTerminal(chat_environment(tmp_path))
    try:
        terminal.wait_for_prompt()
        terminal.type("what did I say about the dentist?\r")
        terminal.wait_for_answer()
        terminal.wait_for_prompt()
        terminal.type("how full is your context?\r")
        terminal.wait_for("context_inspect")
        terminal.wait_for_prompt()
        terminal.type(CTRL_D)
        assert terminal.wait_for_exit() == 0
    finally:
        terminal.close()
    screen = flat(terminal.screen)
    # Each call's line comes first, ticked once it is done; the answer follows under it.
    assert "✓ recall: the dentist [demo] I searched my memory for “the dentist”" in screen
    assert "✓ context_inspect [demo] My context holds" in screen


def test_in_a_terminal_y_approves_a_call_and_n_denies_one(tmp_path: Path) -> None:
    asks = {"schedule": {audience: "ask" for audience in ("admins", "members", "public")}}
    environment = chat_environment(tmp_path, CHORUS_TOOLS_APPROVE=json.dumps(asks))
    terminal = ChatTerminal(environment)
    try:
        terminal.wait_for_prompt()
        terminal.type("remind me in 2 hours to stretch\r")
        terminal.wait_for("run it? [y/N] ")
        terminal.type("y\r")
        terminal.wait_for("Approved.")
        terminal.wait_for_prompt()
        terminal.type("remind me in 3 hours to drink water\r")
        terminal.wait_for("run it? [y/N] ")
        terminal.type("n\r")
        terminal.wait_for("Denied.")
        terminal.wait_for("not run")
        terminal.wait_for_prompt()
        terminal.type("/reminders\r")
        terminal.wait_for("stretch")
        terminal.wait_for_prompt()
        terminal.type(CTRL_D)
        assert terminal.wait_for_exit() == 0
    finally:
        terminal.close()
    screen = flat(terminal.screen)
    assert "? schedule: stretch · waits for your yes" in screen
    assert "drink water" not in screen.split("/reminders", 1)[1]


def test_a_reminder_set_in_the_terminal_is_printed_when_it_falls_due(tmp_path: Path) -> None:
    terminal = ChatTerminal(chat_environment(tmp_path))
    try:
        terminal.wait_for_prompt()
        terminal.type("/remind 2s stretch\r")
        terminal.wait_for("I will remind you")
        terminal.wait_for("⏰ stretch")
        terminal.type(CTRL_D)
        assert terminal.wait_for_exit() == 0
    finally:
        terminal.close()
    assert "Ada › ⏰ stretch" in terminal.screen


class FailsOnce:
    """A provider whose first call raises what no provider should (a defect), then answers."""

    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: ChatRequest) -> AsyncGenerator[ModelEvent, None]:
        self.calls += 1
        if self.calls == 1:
            raise TypeError("unsupported operand type(s) for +: 'int' and 'NoneType'")
        yield TextDelta("fine again")
        yield Finish("stop")

    async def complete(self, request: ChatRequest) -> str:
        return "fine again"

    def accepts_tools(self, model: str) -> bool:
        return False

    def left_out_settings(self, model: str) -> tuple[str, ...]:
        return ()

    async def discover_window(self, model: str) -> int | None:
        return None

    async def aclose(self) -> None:
        return None


async def test_a_turn_that_fails_is_told_and_the_chat_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = make_runtime(tmp_path, provider=FailsOnce(), memory_enabled=False)  # type: ignore[arg-type]
    screen = io.StringIO()
    try:
        await chat_loop(runtime.engine, user="ada", stdin=io.StringIO("first\nsecond\n"), stdout=screen)
        # The engine contains it: the person reads what happened, the log has it once.
        assert_contained(runtime, "terminal", "first", caplog)
    finally:
        await runtime.aclose()
    shown = screen.getvalue()
    assert FAILED_TEXT in shown
    assert "bot › fine again" in shown
    assert shown.endswith(f"{PROMPT}\n")


async def test_a_tool_that_raises_is_told_to_the_model_and_the_chat_goes_on(
    tmp_path: Path, runtimes: RuntimeFactory, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url, memory_enabled=False)
    install_broken_tool(runtime)
    fake_openai.script(ToolCalls([("broken", {})]), "The tool broke; sorry.", "Fine again.")
    screen = io.StringIO()

    await chat_loop(runtime.engine, user="ada", stdin=io.StringIO("use it\nagain\n"), stdout=screen)

    shown = screen.getvalue()
    assert "The tool broke; sorry." in shown and "Fine again." in shown
    assert "broken failed: TypeError" in str(fake_openai.requests[1].messages[-1])
    assert_tool_failure_answered(runtime, "terminal", "use it", caplog)


def test_other_commands_never_load_the_terminals_line_editor_or_markdown_parser() -> None:
    # rich itself is not checked: httpx imports it for its own command line when it is installed.
    probe = (
        "import sys, bot.cli, bot.runtime, channels.terminal\n"
        "print(sorted({name.split('.')[0] for name in sys.modules} & {'prompt_toolkit', 'markdown_it'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
