"""`chorus chat` in a real pseudo-terminal (pexpect), as a person's shell runs it.

Stdin, stdout and stderr are one terminal of 100 × 200, so the chat edits lines with
prompt_toolkit and renders replies with rich; `screen` is what a terminal shows of it (pyte
plays the output back as a terminal would, cursor moves and erasures included).
prompt_toolkit's cursor-position requests are switched off (`PROMPT_TOOLKIT_NO_CPR`): a
terminal answers them, pexpect does not. Every wait is on what the screen shows, with a
generous deadline.
"""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path

import pexpect
import pyte

from tests.support.runtime import REPO_CONFIG

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 120.0
PROMPT = "you › "
COLUMNS, ROWS = 100, 200
# Colour changes, as an answer's rule is drawn with them between its parts.
_COLOURS = r"(?:\x1b\[[0-9;]*m)*"
UP = "\x1b[A"
CTRL_C = "\x03"
CTRL_D = "\x04"


def answer_rule(persona: str) -> re.Pattern[str]:
    """The rule an answer opens with, `── Ada ───…`, in its colours."""
    return re.compile(f"{_COLOURS}{re.escape(persona)}{_COLOURS} {_COLOURS}─")


def chat_environment(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of a chat on its own database (the offline demo model unless `settings` name one)."""
    environment = {
        **os.environ,
        "CHORUS_DATABASE_URL": f"sqlite:///{tmp_path / 'chorus.db'}",
        "CHORUS_DATA_DIR": str(tmp_path / "data"),
        "CHORUS_MEMORY_DENSE": "false",
        "TERM": "xterm-256color",
        "PROMPT_TOOLKIT_NO_CPR": "1",
    }
    environment.pop("CHORUS_MODEL_BASE_URL", None)
    environment.update(settings)
    return environment


class ChatTerminal:
    """One `chorus chat --user NAME` in a pseudo-terminal; `screen` is all it has shown so far."""

    def __init__(self, environment: dict[str, str], user: str = "Grace") -> None:
        self._shown = io.StringIO()
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "bot.cli", "--config", str(REPO_CONFIG), "chat", "--user", user],
            env=environment,
            cwd=str(ROOT),
            dimensions=(ROWS, COLUMNS),
            encoding="utf-8",
            codec_errors="replace",
            timeout=DEADLINE,
        )
        self.child.logfile_read = self._shown

    @property
    def screen(self) -> str:
        """What the terminal shows now, line by line, as a terminal draws what the chat wrote
        (redrawn lines once, in their last state). The terminal is tall enough that nothing a
        test writes scrolls off."""
        screen = pyte.Screen(COLUMNS, ROWS)
        pyte.Stream(screen).feed(self._shown.getvalue())
        return "\n".join(line.rstrip() for line in screen.display).rstrip("\n")

    @property
    def raw(self) -> str:
        """What the chat wrote, escape sequences and all."""
        return self._shown.getvalue()

    def type(self, keys: str) -> None:
        self.child.send(keys)

    def wait_for(self, text: str) -> None:
        """Until `text` is next written (as one run of characters, escapes aside)."""
        self.child.expect_exact(text)

    async def wait_for_async(self, text: str) -> None:
        """`wait_for` while this test's event loop keeps serving (a model stand-in on it)."""
        await self.child.expect_exact(text, async_=True)

    def wait_for_prompt(self) -> None:
        self.wait_for(PROMPT)

    def wait_for_answer(self, persona: str = "Ada") -> None:
        """Until the rule that opens `persona`'s answer is drawn."""
        self.child.expect(answer_rule(persona))

    async def wait_for_answer_async(self, persona: str = "Ada") -> None:
        await self.child.expect(answer_rule(persona), async_=True)

    def wait_for_exit(self) -> int:
        self.child.expect(pexpect.EOF)
        self.child.close()
        status = self.child.exitstatus
        assert status is not None, f"the chat was killed by signal {self.child.signalstatus}"
        return status

    async def wait_for_exit_async(self) -> int:
        await self.child.expect(pexpect.EOF, async_=True)
        self.child.close()
        status = self.child.exitstatus
        assert status is not None, f"the chat was killed by signal {self.child.signalstatus}"
        return status

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)
