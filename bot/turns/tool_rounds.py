"""How many model ↔ tool rounds a turn may take, and when they end early.

A turn calls the model, runs the tools it asked for, and calls it again, up to
`tools.max_steps` rounds; then the model answers once more without tools. The same
call (tool and arguments) made `REPEAT_LIMIT` times in one turn also ends the rounds:
a model caught in a loop gets no further by asking again.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from bot.providers.base import ToolCall
from bot.tools.base import Tool
from transcript.rows import StoredToolCall

REPEAT_LIMIT = 3
# A call's main argument as people see it in a progress line.
SUMMARY_CHARS = 48

EndReason = Literal["steps", "repeated"]
END_NOTES: dict[EndReason, str] = {
    "steps": "[Stopped using tools after {steps} steps.]",
    "repeated": "[Stopped using tools: the same call was repeated {repeats} times.]",
}


@dataclass
class ToolRounds:
    max_steps: int
    steps: int = 0
    ended: EndReason | None = None
    _calls: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def may_call_tools(self) -> bool:
        return self.ended is None

    def record(self, calls: Iterable[ToolCall]) -> None:
        """One round's calls were made: count the step and the repeats."""
        self.steps += 1
        for call in calls:
            key = (call.name, canonical_arguments(call.arguments))
            self._calls[key] += 1
            if self._calls[key] >= REPEAT_LIMIT:
                self.ended = "repeated"
        if self.ended is None and self.steps >= self.max_steps:
            self.ended = "steps"

    def note(self) -> str | None:
        """What the final answer says about rounds that ended early; None when they did not."""
        if self.ended is None:
            return None
        return END_NOTES[self.ended].format(steps=self.steps, repeats=REPEAT_LIMIT)


def only_reads(calls: Iterable[ToolCall], tools: Mapping[str, Tool]) -> bool:
    """Every call names an offered tool that only reads: running it again changes nothing."""
    return all(call.name in tools and tools[call.name].read_only for call in calls)


def canonical_arguments(arguments: str) -> str:
    """The arguments with key order and spacing ignored, so equal calls compare equal."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return arguments.strip()


def progress_summary(call: ToolCall | StoredToolCall) -> str:
    """The call's main argument for a progress line ("dentist" for recall {"query": "dentist"})."""
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        return ""
    if not isinstance(arguments, dict):
        return ""
    value = next((v for v in arguments.values() if isinstance(v, str) and v.strip()), None)
    if value is None:
        value = next((str(v) for v in arguments.values() if isinstance(v, int | float)), "")
    flat = " ".join(value.split())
    return flat if len(flat) <= SUMMARY_CHARS else flat[: SUMMARY_CHARS - 1] + "…"
