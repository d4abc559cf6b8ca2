"""The terminal rendered for people: replies as Markdown (rich), tool steps and thinking as asides.

Each answer opens with a rule naming the persona that speaks. Its text streams as Markdown
(`markdown_stream`): headings, emphasis, lists, tables, and code blocks highlighted in the
terminal's own colours. A tool call is one dim line, updated in place as it reports progress
and ticked when it is done; thinking is a spinner until the answer starts. Command answers
keep their own layout (plain text, aligned as written), errors are red, and a stopped or
cut-off reply ends with its bracketed note. The marks are drawn from characters every
terminal font has, never emoji.
"""

from __future__ import annotations

import re
from typing import TextIO

from rich.console import Console, RenderableType
from rich.live import Live
from rich.rule import Rule
from rich.spinner import Spinner
from rich.text import Text

from bot.turns.events import Delta, Reply, Thinking, ToolStep
from channels.terminal.markdown_stream import MarkdownStream, markdown
from channels.terminal.plain import BANNER, PROMPT

# What a tool step's line starts with, by its state.
STEP_MARKS = {"started": "⚙", "progress": "⚙", "asked": "?", "done": "✓", "error": "⚠", "denied": "✗"}
# Control characters other than newline and tab: a model's text must never move the cursor,
# retitle the window or write to the clipboard (ESC sequences), only show.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """`text` as safe to draw: its control characters (escape sequences among them) dropped."""
    return CONTROL_CHARACTERS.sub("", text)


class StyledScreen:
    """The conversation drawn on a terminal with rich."""

    def __init__(self, stdout: TextIO, keys: str | None = None) -> None:
        self.console = Console(file=stdout, highlight=False, emoji=False)
        # What the keys do, said under the banner when lines are edited here.
        self.keys = keys
        self._stream: MarkdownStream | None = None
        # The step line or the thinking spinner, redrawn in place until something follows it.
        self._live: Live | None = None
        self._live_call: str | None = None
        # Whether this turn's answer has its heading yet, and whether text streamed in it.
        self._headed = False
        self._streamed = False
        # Whether the last thing drawn in this turn was a tool step's line.
        self._stepped = False

    def banner(self) -> None:
        self.console.print(Text(BANNER.rstrip("\n"), style="bold"))
        if self.keys:
            self.console.print(Text(self.keys, style="dim"))

    def farewell(self) -> None:
        self._settle()
        self.console.print()

    def cleared(self) -> None:
        self.console.print()
        self.console.file.write(PROMPT)
        self.console.file.flush()

    def show(self, event: Delta | Thinking | ToolStep) -> None:
        self._head(event.persona_name)
        if isinstance(event, Delta):
            self._text(event.text)
        elif isinstance(event, Thinking):
            self._settle()
            self._open_live(Spinner("circle", Text(" thinking…", style="dim italic"), style="dim"), None)
        else:
            self._step(event)

    def reply(self, reply: Reply) -> None:
        streamed = self._streamed
        self._settle()
        if streamed:
            if reply.status != "complete" or reply.kind == "error":
                last = reply.text.splitlines()[-1] if reply.text else ""
                note = last if last.startswith("[") else f"[{last}]"
                self.console.print(Text(shown(note), style="yellow"))
        elif reply.text and reply.kind == "assistant":
            self._head(reply.persona_name)
            self.console.print(markdown(shown(reply.text)))
        elif reply.text:
            # A command's answer keeps its own layout: its tables are aligned as written.
            style = "red" if reply.kind == "error" else ""
            self.console.print(Text(shown(reply.text), style=style))
        if reply.reasoning:
            # /reasoning on: the thinking that led to the answer, as an aside after it.
            self.console.print(Rule(Text("thinking", style="dim italic"), align="left", style="dim"))
            self.console.print(Text(shown(reply.reasoning.strip()), style="dim italic"))
        self._end_turn()

    def turn_failed(self, text: str) -> None:
        self._settle()
        self.console.print(Text(shown(text), style="red"))
        self._end_turn()

    def approval_decided(self, text: str) -> None:
        self.console.print(Text(f"  {shown(text)}", style="dim"))

    def reminder(self, persona_name: str, text: str) -> None:
        self.console.print(Text.assemble((f"{shown(persona_name)} › ", "bold"), shown(text)))

    # --- the parts of a turn --------------------------------------------------------

    def _head(self, persona_name: str | None) -> None:
        if self._headed or not persona_name:
            return
        self._headed = True
        self.console.print(Rule(Text(shown(persona_name), style="bold cyan"), align="left", style="dim"))

    def _text(self, text: str) -> None:
        if self._live is not None:
            self._close_live()
        if self._stream is None:
            if self._stepped:
                # The answer stands apart from the step lines above it.
                self.console.print()
                self._stepped = False
            self._stream = MarkdownStream(self.console)
        self._streamed = True
        self._stream.add(shown(text))

    def _step(self, step: ToolStep) -> None:
        if step.status == "done":
            # The call's line, if nothing followed it yet, is ticked.
            if self._live is not None and self._live_call == step.call_id:
                self._live.update(self._step_line(step), refresh=True)
                self._close_live()
            return
        if self._live is not None and self._live_call == step.call_id:
            self._live.update(self._step_line(step), refresh=True)
        else:
            self._settle()
            self._open_live(self._step_line(step), step.call_id)
            self._stepped = True
        if step.status in ("asked", "error", "denied"):
            # Its line stays as it is: a question waits under it, or the call is over.
            self._close_live()

    def _step_line(self, step: ToolStep) -> Text:
        line = f"  {STEP_MARKS.get(step.status, '⚙')} {step.call_text}"
        if step.status == "progress" and step.progress:
            line += f" · {step.progress}"
        elif step.status == "denied":
            line += " · not run"
        elif step.status == "asked":
            line += " · waits for your yes"
        style = "yellow" if step.status in ("asked", "error", "denied") else "dim"
        return Text(shown(line), style=style)

    def _open_live(self, renderable: RenderableType, call_id: str | None) -> None:
        # A spinner animates on its own; a step line is redrawn when its call reports.
        spinning = isinstance(renderable, Spinner)
        self._live = Live(
            renderable,
            console=self.console,
            auto_refresh=spinning,
            refresh_per_second=8,
            transient=spinning,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live_call = call_id
        self._live.start(refresh=True)

    def _close_live(self) -> None:
        if self._live is not None:
            self._live.stop()
        self._live = None
        self._live_call = None

    def _settle(self) -> None:
        """Whatever is being redrawn is drawn for good, so the next thing starts below it."""
        self._close_live()
        if self._stream is not None:
            self._stream.finish()
            self._stream = None

    def _end_turn(self) -> None:
        self._headed = False
        self._streamed = False
        self._stepped = False
        self.console.print()
