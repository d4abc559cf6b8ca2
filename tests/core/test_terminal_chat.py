"""`chorus chat` in a real terminal (a pty): the screen shows the conversation, the log goes to a file."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.support.runtime import REPO_CONFIG

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 120.0


class Terminal:
    """A process whose stdin, stdout and stderr are one pseudo-terminal, as in a person's shell."""

    def __init__(self, command: list[str], environment: dict[str, str]) -> None:
        self.screen = ""
        self._master, replica = pty.openpty()
        self.process = subprocess.Popen(
            command, stdin=replica, stdout=replica, stderr=replica, cwd=ROOT, env=environment
        )
        os.close(replica)

    def type(self, keys: str) -> None:
        os.write(self._master, keys.encode())

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while text not in self.screen:
            if time.monotonic() > deadline or not self._read(deadline):
                raise AssertionError(f"{text!r} never appeared; the screen shows:\n{self.screen}")

    def wait_for_exit(self) -> int:
        deadline = time.monotonic() + DEADLINE
        while self._read(deadline):
            pass
        return self.process.wait(timeout=max(deadline - time.monotonic(), 1))

    def _read(self, deadline: float) -> bool:
        """Read what the terminal shows next; False once the process closed it."""
        ready, _, _ = select.select([self._master], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            return False
        try:
            chunk = os.read(self._master, 4096)
        except OSError:  # the other side closed
            return False
        self.screen += chunk.decode(errors="replace")
        return bool(chunk)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self._master)


def chat_terminal(tmp_path: Path, **environment: str) -> Terminal:
    """`chorus chat` as Grace, on the offline demo model, with its own database."""
    environment = {
        **os.environ,
        "CHORUS_DATABASE_URL": f"sqlite:///{tmp_path / 'chorus.db'}",
        "CHORUS_DATA_DIR": str(tmp_path / "data"),
        **environment,
    }
    environment.pop("CHORUS_MODEL_BASE_URL", None)
    command = [sys.executable, "-m", "bot.cli", "--config", str(REPO_CONFIG), "chat", "--user", "Grace"]
    return Terminal(command, environment)


def test_the_terminal_shows_the_conversation_and_the_log_goes_to_a_file(tmp_path: Path) -> None:
    terminal = chat_terminal(tmp_path, CHORUS_LOG_LEVEL="INFO")
    try:
        terminal.wait_for("you › ")
        terminal.type("hello there\n")
        terminal.wait_for("— Ada")
        terminal.type("/help\n")
        terminal.wait_for("/recall QUERY")
        terminal.type("\x04")  # Ctrl-D: end of input
        assert terminal.wait_for_exit() == 0
    finally:
        terminal.close()

    screen = terminal.screen.replace("\r\n", "\n")
    assert "Chorus terminal chat" in screen and "bot › " in screen
    # Warnings still reach the terminal (here: no model configured), INFO lines do not.
    assert "WARNING bot.runtime: No model configured" in screen
    assert " INFO " not in screen and "turn complete" not in screen
    log = (tmp_path / "data" / "chat.log").read_text(encoding="utf-8")
    assert "INFO bot.metrics" in log and "turn complete" in log


def test_the_demo_models_tool_calls_show_as_progress_lines_before_the_answer(tmp_path: Path) -> None:
    terminal = chat_terminal(tmp_path)
    try:
        terminal.wait_for("you › ")
        terminal.type("what did I say about the dentist?\n")
        terminal.wait_for("— Ada")
        terminal.type("how full is your context?\n")
        terminal.wait_for("🔧 context_inspect")
        terminal.wait_for("— Ada")
        terminal.type("\x04")
        assert terminal.wait_for_exit() == 0
    finally:
        terminal.close()

    screen = terminal.screen.replace("\r\n", "\n")
    # Each call's line comes first, on its own line; the answer follows on a new "bot ›" line.
    assert "  🔧 recall: the dentist\nbot › [demo] I searched my memory for “the dentist”" in screen
    assert "  🔧 context_inspect\nbot › [demo] My context holds" in screen


def test_a_reminder_set_in_the_terminal_is_printed_when_it_falls_due(tmp_path: Path) -> None:
    terminal = chat_terminal(tmp_path)
    try:
        terminal.wait_for("you › ")
        terminal.type("/remind 2s stretch\n")
        terminal.wait_for("I will remind you")
        terminal.wait_for("Ada › ⏰ stretch")
        terminal.type("\x04")
        assert terminal.wait_for_exit() == 0
    finally:
        terminal.close()
