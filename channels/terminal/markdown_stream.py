"""A reply rendered as Markdown while it streams, with no flicker and nothing drawn twice.

The reply is cut into its top-level blocks (paragraphs, lists, code blocks, tables) with
the parser rich's own Markdown uses. A block followed by another one is complete: it is
rendered once and printed for good. Only the last block, the one still being written, is
redrawn in place (a rich `Live`), and of it only as many lines as the screen holds: lines
above that are printed for good too (a long code block scrolls as it streams). Redraws are
spaced by the time the last one took, so a long block costs a few renders a second, not one
per token.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import ClassVar

from markdown_it import MarkdownIt
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderResult
from rich.live import Live
from rich.markdown import Heading, Markdown, MarkdownElement
from rich.segment import Segment

# Redraws of the block being written: at least this far apart, and several times as far as
# the last one took to render.
MIN_REDRAW_SECONDS = 0.05
REDRAW_COST_FACTOR = 4
# Code blocks use the terminal's own colours: right on light and dark backgrounds alike.
CODE_THEME = "ansi_dark"

Line = list[Segment]


class LeftHeading(Heading):
    """Headings start at the margin like the text under them (rich centres a top-level one)."""

    LEVEL_ALIGN: ClassVar[dict[str, JustifyMethod]] = dict.fromkeys(
        ("h1", "h2", "h3", "h4", "h5", "h6"), "left"
    )


class ReplyMarkdown(Markdown):
    elements: ClassVar[dict[str, type[MarkdownElement]]] = {**Markdown.elements, "heading_open": LeftHeading}


def markdown(text: str) -> Markdown:
    """`text` as the terminal renders a reply; links show their address beside their text."""
    return ReplyMarkdown(text, code_theme=CODE_THEME, hyperlinks=False)


def rendered(console: Console, text: str) -> list[Line]:
    """`text` as lines for `console`: no blank lines around it, no padding after each line's end
    (rich pads every line to the width; copied from the terminal, the spaces would come along)."""
    lines = [_trimmed(line) for line in console.render_lines(markdown(text), console.options, pad=False)]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _trimmed(line: Line) -> Line:
    trimmed = list(line)
    while trimmed and _is_padding(trimmed[-1]):
        last = trimmed.pop()
        kept = last.text.rstrip()
        if kept:
            trimmed.append(Segment(kept, last.style, last.control))
            break
    return trimmed


def _is_padding(segment: Segment) -> bool:
    """Trailing spaces nobody sees: no background colour behind them."""
    if segment.control or segment.text[-1:] != " " and segment.text.strip():
        return False
    return segment.style is None or segment.style.bgcolor is None


class Lines:
    """Rendered lines, printable as they are."""

    def __init__(self, lines: Iterable[Line]) -> None:
        self.lines = list(lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines:
            yield from line
            yield Segment.line()


class MarkdownStream:
    """One stretch of streamed reply text on `console`, from its first piece to `finish`."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._parser = MarkdownIt("commonmark").enable("strikethrough").enable("table")
        self._source: list[str] = [""]  # the text so far, by line
        # The first line of the block being written; blocks above it are printed.
        self._block_start = 0
        self._blocks_printed = 0
        # Lines of the block being written that were printed already (it outgrew the screen).
        self._block_lines_printed = 0
        self._live: Live | None = None
        self._redraw: asyncio.TimerHandle | None = None
        self._next_redraw = 0.0

    def add(self, text: str) -> None:
        head, *rest = text.split("\n")
        self._source[-1] += head
        self._source += rest
        if self._redraw is not None:
            return
        delay = self._next_redraw - time.monotonic()
        if delay <= 0:
            self._render()
        else:
            self._redraw = asyncio.get_running_loop().call_later(delay, self._redrawn)

    def finish(self) -> None:
        """The stretch is over: everything is printed for good."""
        if self._redraw is not None:
            self._redraw.cancel()
            self._redraw = None
        if self._live is not None:
            # The block being redrawn goes (the Live is transient), and is printed for good.
            self._live.stop()
            self._live = None
        self._render(final=True)

    def _redrawn(self) -> None:
        self._redraw = None
        self._render()

    def _render(self, *, final: bool = False) -> None:
        started = time.monotonic()
        starts = self._block_starts()
        # Blocks followed by another are complete; at the end, the last one is too.
        complete = starts[1:] + ([len(self._source)] if final else [])
        for end in complete:
            self._print_block(self._lines_of(self._block_start, end))
            self._block_start = end
        if not final and self._block_start < len(self._source):
            self._show_tail(self._lines_of(self._block_start, len(self._source)))
        took = time.monotonic() - started
        self._next_redraw = time.monotonic() + max(MIN_REDRAW_SECONDS, REDRAW_COST_FACTOR * took)

    def _block_starts(self) -> list[int]:
        """Where each top-level block from the one being written on begins (absolute line numbers)."""
        text = "\n".join(self._source[self._block_start :])
        starts = [
            self._block_start + token.map[0]
            for token in self._parser.parse(text)
            if token.level == 0 and token.nesting >= 0 and token.map is not None
        ]
        return starts or [self._block_start]

    def _lines_of(self, start: int, end: int) -> list[Line]:
        text = "\n".join(self._source[start:end]).strip("\n")
        return rendered(self.console, text) if text.strip() else []

    def _print_block(self, lines: list[Line]) -> None:
        if not lines:
            return
        self._print(self._spaced(lines)[self._block_lines_printed :])
        self._blocks_printed += 1
        self._block_lines_printed = 0

    def _show_tail(self, lines: list[Line]) -> None:
        if not lines:
            return
        room = max(self.console.height - 1, 1)
        unprinted = self._spaced(lines)[self._block_lines_printed :]
        if len(unprinted) > room:
            # Taller than the screen: what scrolls off is printed for good.
            overflow = len(unprinted) - room
            self._print(unprinted[:overflow])
            self._block_lines_printed += overflow
            unprinted = unprinted[overflow:]
        live = self._live
        if live is None:
            live = self._live = Live(
                console=self.console,
                auto_refresh=False,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
                vertical_overflow="visible",
            )
            live.start()
        live.update(Lines(unprinted), refresh=True)

    def _spaced(self, lines: list[Line]) -> list[Line]:
        """A block's lines, after the blank line that parts it from the block above."""
        return [[], *lines] if self._blocks_printed else lines

    def _print(self, lines: list[Line]) -> None:
        if not lines:
            return
        if self._live is not None:
            # Above the block being redrawn, which then follows.
            self._live.console.print(Lines(lines))
        else:
            self.console.print(Lines(lines))
