"""The terminal as plain text: what a script piping into `chorus chat` reads, line by line.

Used whenever stdout is not a terminal (and for input, whenever stdin or stdout is not one),
so its output stays exactly what scripts were written against: `you › ` prompts, a
streamed reply after `bot › ` ending with `— Persona`, one line per tool step.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TextIO

from bot.turns.events import THINKING_LINE, Delta, Reply, Thinking, ToolStep

PROMPT = "you › "
BANNER = "Chorus terminal chat — /help for commands, Ctrl-D to leave.\n"
# ANSI dim and reset: the thinking reads as an aside.
DIM = "\x1b[2m"
PLAIN = "\x1b[0m"


class PlainInput:
    """Lines read from stdin, the prompt written before each.

    Each read runs in a daemon thread of its own rather than the loop's executor: a
    blocked `readline` must never hold the process's exit (Ctrl-C at a prompt used to hang
    until Enter). A line read after its caller stopped waiting is kept for the next read.
    """

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self._lines: asyncio.Queue[str] = asyncio.Queue()
        self._reading = False
        self._waiting: asyncio.Task[str] | None = None

    @property
    def clears_line_on_interrupt(self) -> bool:
        """Ctrl-C at a prompt typed in a terminal drops what was typed; a pipe has no line to clear."""
        return self.stdin.isatty()

    async def line(self, prompt: str, *, remember: bool = True) -> str | None:
        """The next line without its newline; None at the end of input or when `interrupt` is called."""
        self.stdout.write(prompt)
        self.stdout.flush()
        if self._lines.empty() and not self._reading:
            self._reading = True
            loop = asyncio.get_running_loop()
            threading.Thread(target=self._read_one, args=(loop,), daemon=True, name="stdin").start()
        self._waiting = asyncio.ensure_future(self._lines.get())
        try:
            line = await self._waiting
        except asyncio.CancelledError:
            if self._waiting.cancelled() and not _cancelling():
                return None
            raise
        finally:
            self._waiting = None
        return line.removesuffix("\n") if line else None

    def interrupt(self) -> None:
        """The line being waited for is not needed any more (the turn asking for it was stopped)."""
        if self._waiting is not None:
            self._waiting.cancel()

    def _read_one(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            line = self.stdin.readline()
        except (OSError, ValueError):
            line = ""  # stdin closed under the read: the end of input

        def deliver() -> None:
            self._reading = False
            self._lines.put_nowait(line)

        loop.call_soon_threadsafe(deliver)

    def quiet_keys(self) -> AbstractContextManager[None]:
        """Keys typed while a reply plays: a plain terminal echoes them as it always did."""
        return nullcontext()

    async def above_prompt(self, show: Callable[[], None]) -> None:
        """Run `show`, which writes to the screen while a prompt may be waiting."""
        show()


def _cancelling() -> int:
    task = asyncio.current_task()
    return task.cancelling() if task is not None else 0


class PlainScreen:
    """The conversation as plain lines of text."""

    def __init__(self, stdout: TextIO) -> None:
        self.stdout = stdout
        # Whether a line of streamed reply text is open.
        self._streamed = False

    def banner(self) -> None:
        self._write(BANNER)

    def farewell(self) -> None:
        self._write("\n")

    def cleared(self) -> None:
        self._write(f"\n{PROMPT}")

    def show(self, event: Delta | Thinking | ToolStep) -> None:
        if isinstance(event, Delta):
            if not self._streamed:
                self.stdout.write("bot › ")
                self._streamed = True
            self._write(event.text)
        elif isinstance(event, ToolStep):
            self._step(event)
        else:
            self._write(f"\n  {THINKING_LINE}\n" if self._streamed else f"  {THINKING_LINE}\n")
            self._streamed = False

    def _step(self, step: ToolStep) -> None:
        """A call starting, reporting progress or failing gets a line of its own; the answer then
        starts a new line."""
        if step.status == "done":
            return
        if self._streamed:
            self.stdout.write("\n")
        self._write(f"  {step.progress_line}\n")
        self._streamed = False

    def reply(self, reply: Reply) -> None:
        streamed, self._streamed = self._streamed, False
        if reply.reasoning:
            # /reasoning on: the thinking, dimmed and marked, after the answer it led to.
            thought = "\n".join(
                f"{DIM}  💭 {line}{PLAIN}" for line in reply.reasoning.splitlines() if line.strip()
            )
            self.stdout.write(f"{thought}\n" if not streamed else f"\n{thought}")
        if streamed:
            if reply.status != "complete" or reply.kind == "error":
                # Stopped and cut-off replies end with their own bracketed note.
                last = reply.text.splitlines()[-1]
                self.stdout.write(f"\n{last}" if last.startswith("[") else f"\n[{last}]")
            self.stdout.write(f"\n  — {reply.persona_name}\n" if reply.persona_name else "\n")
        elif reply.text:
            label = reply.persona_name if reply.kind == "assistant" else "chorus"
            self.stdout.write(f"{label} › {reply.text}\n")
        self.stdout.flush()

    def turn_failed(self, text: str) -> None:
        streamed, self._streamed = self._streamed, False
        self._write(f"\n{text}\n" if streamed else f"{text}\n")

    def approval_decided(self, text: str) -> None:
        self._write(f"  {text}\n")

    def reminder(self, persona_name: str, text: str) -> None:
        self._write(f"\n{persona_name} › {text}\n{PROMPT}")

    def _write(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()
