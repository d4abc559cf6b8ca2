"""What a streaming draft shows of a turn: the answer so far, or one line per tool call.

While tools run, a draft on Telegram or Discord shows one short line per call
("🔧 recall: dentist", with the newest progress a call reported: "… · 2/4"); the
answer's text replaces those lines as it streams. While the model thinks, the draft
shows "💭 thinking…" (after the tool lines, or the answer so far) instead of a blank.
"""

from __future__ import annotations

from bot.turns.events import THINKING_LINE, Delta, Thinking, ToolStep


class TurnPreview:
    """Follows a turn's `Delta`s and `ToolStep`s and says what its draft shows now."""

    def __init__(self) -> None:
        self._text = ""
        # One line per call of the turn so far, in the order the calls started.
        self._lines: dict[str, str] = {}
        self._thinking = False

    def add(self, event: Delta | Thinking | ToolStep) -> str:
        """Take one event; returns the draft's text after it."""
        self._thinking = isinstance(event, Thinking)
        if isinstance(event, ToolStep):
            if event.status == "started":
                # The text before a call belongs to its tool round (stored with the call):
                # the answer streams anew after the last step.
                self._text = ""
            self._lines[event.call_id] = event.progress_line
        elif isinstance(event, Delta):
            self._text += event.text
        return self.shown

    @property
    def shows_progress(self) -> bool:
        """True while the draft shows progress lines (or thinking) rather than the answer."""
        return bool(self._lines or self._thinking) and not self._text.strip()

    @property
    def shown(self) -> str:
        if not self.shows_progress:
            return f"{self._text}\n\n{THINKING_LINE}" if self._thinking else self._text
        lines = [*self._lines.values(), *([THINKING_LINE] if self._thinking else [])]
        return "\n".join(lines)
