"""Line editing for `chorus chat` in a terminal, with prompt_toolkit.

prompt_toolkit rather than readline: it reads keys on the event loop the turns run on
(`prompt_async`), so a reminder can be printed above a waiting prompt and nothing blocks a
thread; it behaves the same wherever Chorus runs (readline is GNU readline on Linux and
libedit on macOS, with different keys and history files), and it brings completion and
multi-line editing without extra code.

Keys: Enter sends; Esc Enter inserts a new line; Up and Down walk the history, kept in a
file between runs; Tab completes a command; Ctrl-C clears the line; Ctrl-D on an empty
line leaves. While a reply plays, typed keys are not echoed over it: they wait for the next
prompt.
"""

from __future__ import annotations

import termios
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import create_input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import create_output
from prompt_toolkit.styles import Style

# Said under the banner.
KEYS = "↑ history · Esc Enter new line · Tab completes a /command · Ctrl-C stops a reply · Ctrl-D leaves"
STYLE = Style.from_dict({"prompt": "bold ansigreen"})


class CommandCompleter(Completer):
    """A line that starts with `/` completes to the chat's commands."""

    def __init__(self, commands: Iterable[str]) -> None:
        self.commands = sorted(commands)

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        typed = document.text_before_cursor
        if not typed.startswith("/") or " " in typed:
            return
        for command in self.commands:
            if command.startswith(typed):
                yield Completion(command, start_position=-len(typed))


def _key_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _new_line(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return bindings


# The newest lines kept in the history file; older ones are dropped when a chat starts, so a
# file that every message of every run is appended to stays small and quick to load.
HISTORY_ENTRIES = 1000


class BoundedFileHistory(FileHistory):
    """prompt_toolkit's history file, cut to its newest HISTORY_ENTRIES lines when loaded."""

    def load_history_strings(self) -> Iterable[str]:
        newest_first = list(super().load_history_strings())
        if len(newest_first) <= HISTORY_ENTRIES:
            return newest_first
        kept = newest_first[:HISTORY_ENTRIES]
        path = Path(str(self.filename))
        replacement = path.with_name(path.name + ".new")
        replacement.touch(mode=0o600, exist_ok=True)
        replacement.write_text(
            "".join("\n" + "".join(f"+{line}\n" for line in entry.split("\n")) for entry in reversed(kept)),
            encoding="utf-8",
        )
        replacement.replace(path)
        return kept


def history_file(path: Path) -> History:
    """The typed lines kept in `path`, readable by its owner only (they are the conversation)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    return BoundedFileHistory(str(path))


class EditedInput:
    """Lines typed at a prompt_toolkit prompt."""

    # Ctrl-C at the prompt is a key here (the terminal is in raw mode), never a signal.
    clears_line_on_interrupt = False

    def __init__(self, stdin: TextIO, stdout: TextIO, history: Path | None, commands: Iterable[str]) -> None:
        self._fd = stdin.fileno()
        terminal_input, terminal_output = create_input(stdin), create_output(stdout)
        self._lines: PromptSession[str] = PromptSession(
            history=history_file(history) if history is not None else InMemoryHistory(),
            completer=CommandCompleter(commands),
            complete_while_typing=False,
            key_bindings=_key_bindings(),
            style=STYLE,
            input=terminal_input,
            output=terminal_output,
        )
        # An approval's y/n: its own prompt, so it never joins the history.
        self._answers: PromptSession[str] = PromptSession(
            style=STYLE, input=terminal_input, output=terminal_output
        )
        self._active: PromptSession[str] | None = None

    async def line(self, prompt: str, *, remember: bool = True) -> str | None:
        session = self._lines if remember else self._answers
        self._active = session
        try:
            return await session.prompt_async([("class:prompt", prompt)])
        except KeyboardInterrupt:
            # Ctrl-C: the line is dropped; at a y/n question that is a no.
            return "" if remember else None
        except EOFError:
            return None
        finally:
            self._active = None

    def interrupt(self) -> None:
        if self._active is not None and self._active.app.is_running:
            self._active.app.exit(result="")

    @contextmanager
    def quiet_keys(self) -> Iterator[None]:
        """Keys typed while a reply plays are not echoed (they would be drawn over it); they
        stay in the terminal's input for the next prompt. Ctrl-C still signals."""
        try:
            saved = termios.tcgetattr(self._fd)
        except termios.error:
            yield
            return
        quiet = list(saved)
        quiet[3] &= ~termios.ECHO
        termios.tcsetattr(self._fd, termios.TCSANOW, quiet)
        try:
            yield
        finally:
            termios.tcsetattr(self._fd, termios.TCSANOW, saved)

    async def above_prompt(self, show: Callable[[], None]) -> None:
        await run_in_terminal(show)
