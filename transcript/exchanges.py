"""Tool exchanges among stored rows: where one begins and ends, so that no cut splits one.

An exchange is an assistant row that called tools and the `tool` rows right after it
that answer its calls. Compaction cuts, collapsed ranges and snips are snapped to whole
exchanges with these helpers; `transcript.turns` does the same for the window.
"""

from __future__ import annotations

from collections.abc import Sequence

from transcript.kinds import is_conversation
from transcript.rows import TranscriptRow

Span = tuple[int, int]


def exchange_spans(rows: Sequence[TranscriptRow]) -> list[Span]:
    """(first seq, last seq) of each exchange in `rows` (oldest first; events between are skipped)."""
    spans: list[Span] = []
    conversation = [row for row in rows if is_conversation(row.kind)]
    index = 0
    while index < len(conversation):
        row = conversation[index]
        index += 1
        if row.kind != "tool_call":
            continue
        wanted = {call.id for call in row.tool_calls}
        last = row.seq
        while index < len(conversation) and conversation[index].kind == "tool_result":
            if conversation[index].tool_call_id in wanted:
                last = conversation[index].seq
            index += 1
        spans.append((row.seq, last))
    return spans


def units_of(rows: Sequence[TranscriptRow]) -> list[tuple[TranscriptRow, ...]]:
    """Conversation rows (events left out) in units: a message, or one whole exchange."""
    spans = {first: last for first, last in exchange_spans(rows)}
    units: list[tuple[TranscriptRow, ...]] = []
    current: list[TranscriptRow] = []
    last_of_current = None
    for row in rows:
        if not is_conversation(row.kind):
            continue
        if last_of_current is not None and row.seq <= last_of_current:
            current.append(row)
            continue
        if current:
            units.append(tuple(current))
        current, last_of_current = [row], spans.get(row.seq)
    if current:
        units.append(tuple(current))
    return units


def snap_cut(seq: int, spans: Sequence[Span]) -> int:
    """A cut after `seq` that would split an exchange moves to just before the exchange."""
    for first, last in spans:
        if first <= seq < last:
            return first - 1
    return seq


def widen(first_seq: int, last_seq: int, spans: Sequence[Span]) -> Span:
    """The range grown to cover every exchange it touches."""
    for first, last in spans:
        if first <= last_seq and last >= first_seq:
            first_seq, last_seq = min(first_seq, first), max(last_seq, last)
    return first_seq, last_seq
