"""What a tight window leaves out, in a documented order, so the person's question always fits.

When the system prompt, the question and everything optional do not fit the budget, the
optional parts give way first, in this order (docs/context.md, "A tight window"):

1. tool schemas — the least wanted first (the budget lists them most wanted first: the
   tools this persona used recently), down to none at all;
2. recalled lines — the last (least relevant) first;
3. the memory snapshot — cut in the middle, down to nothing;
4. the summary of the earlier conversation — cut in the middle, down to nothing.

Earlier messages are owed `history_share` of the room left after the instructions and the
question before any of these may take it; what is still too much is then dropped from the
oldest end by the window itself, whole units at a time (a tool call with its results).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transcript.shorten import shorten
from transcript.tokens import count_tokens

# A cut shorter than this leaves too little of the part to be worth its heading.
_MIN_PART_TOKENS = 40


@dataclass(frozen=True)
class ToolCost:
    """One tool schema offered this call and the tokens it takes in the request."""

    name: str
    tokens: int


@dataclass(frozen=True)
class ShedNote:
    """What gave way of one part: `part` names it for metrics, the note reads as one line."""

    part: str  # "tools", "recall", "memory snapshot" or "summary"
    detail: str

    def __str__(self) -> str:
        return f"{self.part}: {self.detail}"


@dataclass(frozen=True)
class OptionalParts:
    """The parts that may give way, as they go into the request."""

    tools: tuple[ToolCost, ...]
    summary: str | None
    memory: str | None
    recall: tuple[str, ...]
    # What gave way, one line per part, for /context and the log; empty when all fit.
    notes: tuple[ShedNote, ...] = ()


def shed(parts: OptionalParts, *, room: int, history_tokens: int, history_share: float) -> OptionalParts:
    """`parts` within `room` tokens less what earlier messages (`history_tokens`) are owed."""
    owed = min(history_tokens, int(max(room, 0) * history_share))
    cap = room - owed
    tools = list(parts.tools)
    recall = list(parts.recall)
    summary, memory = parts.summary, parts.memory
    sizes = _Sizes(summary, memory, recall)
    notes: list[ShedNote] = []
    excess = sum(tool.tokens for tool in tools) + sizes.total() - cap
    if excess <= 0:
        return parts
    dropped_tools = 0
    while tools and excess > 0:
        excess -= tools.pop().tokens
        dropped_tools += 1
    if dropped_tools:
        kept = ", ".join(tool.name for tool in tools) or "none"
        notes.append(
            ShedNote("tools", f"{dropped_tools} of {len(parts.tools)} schemas left out (kept: {kept})")
        )
    dropped_recall = 0
    while recall and excess > 0:
        excess -= sizes.recall.pop()
        recall.pop()
        dropped_recall += 1
    if dropped_recall:
        notes.append(ShedNote("recall", f"{dropped_recall} of {len(parts.recall)} recalled lines left out"))
    if memory and excess > 0:
        memory, saved = _cut(memory, sizes.memory, excess)
        excess -= saved
        notes.append(ShedNote("memory snapshot", "left out" if memory is None else "shortened"))
    if summary and excess > 0:
        summary, saved = _cut(summary, sizes.summary, excess)
        excess -= saved
        notes.append(ShedNote("summary", "left out" if summary is None else "shortened"))
    return OptionalParts(tuple(tools), summary, memory, tuple(recall), tuple(notes))


class _Sizes:
    def __init__(self, summary: str | None, memory: str | None, recall: Sequence[str]) -> None:
        self.summary = count_tokens(summary) if summary else 0
        self.memory = count_tokens(memory) if memory else 0
        self.recall = [count_tokens(item) + 2 for item in recall]

    def total(self) -> int:
        return self.summary + self.memory + sum(self.recall)


def _cut(text: str, tokens: int, excess: int) -> tuple[str | None, int]:
    """`text` `excess` tokens shorter (None when too little would be left), and the tokens saved."""
    if tokens - excess < _MIN_PART_TOKENS:
        return None, tokens
    shortened, left = shorten(text, tokens, excess_tokens=excess, excess_chars=0)
    return shortened, tokens - left
