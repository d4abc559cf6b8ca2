"""Which stored rows fit in a turn: the stepped window (docs/context.md, docs/ARCHITECTURE.md §5).

Seed 000's buildContextWindow in steps that `build_context` runs over a turn's units
(messages and whole tool exchanges): start at the window's current step, drop the oldest
(again in steps) until the caps fit, then start at a user message. The costs it passes
count names, attachments and the preamble as well as the text.

The window starts only at marks, fixed sequence numbers `stride` apart (1, 1 + stride, …):
it stays at a mark until more than `CONTEXT_COUNT` units would follow it, then moves to the
next mark that fits, which leaves about `low_water` units. Every lane and process reads the
same stored rows, so all of them start at the same mark; between two steps each request's
messages begin with the previous request's. A stride of one is seed 000's rolling window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from transcript.kinds import MessageKind, message_kind
from transcript.rows import TranscriptRow

RowLike = TranscriptRow | Mapping[str, object]


def row_kind(row: RowLike) -> MessageKind:
    """The row's kind; raises `UnknownMessageKind` for one this package does not know.

    A mapping without a kind has the shape rows had before kinds: its role says it
    (`system` rows were always events).
    """
    kind = row_field(row, "kind")
    if kind is None:
        return "note" if row_field(row, "role") == "system" else "message"
    return message_kind(kind)


def row_field(row: RowLike, name: str) -> object:
    """A field of a stored row, whether it is a `TranscriptRow` or a plain mapping."""
    # Stored rows are TranscriptRows: checked first, since the Mapping check is an ABC's.
    if type(row) is TranscriptRow or not isinstance(row, Mapping):
        return getattr(row, name, None)
    return row.get(name)


def drop_oldest(limits: Sequence[tuple[Sequence[int], int]], *, keep_from: int) -> int:
    """How many of the oldest items to drop so that every total fits its limit.

    Each limit pairs per-item sizes (oldest first) with the cap on their sum.
    Items at index `keep_from` and later are never dropped, even if the caps
    still do not fit; the caller decides what to do then.
    """
    totals = [sum(sizes) for sizes, _ in limits]
    start = 0
    while start < keep_from and any(total > cap for total, (_, cap) in zip(totals, limits, strict=True)):
        for index, (sizes, _) in enumerate(limits):
            totals[index] -= sizes[start]
        start += 1
    return start


def first_user(roles: Sequence[str], start: int) -> int:
    """The index of the first `user` role at or after `start` (len(roles) if none).

    Models expect a conversation to open with the user, and chat templates
    misalign when it opens with the assistant.
    """
    while start < len(roles) and roles[start] != "user":
        start += 1
    return start


def stride_of(size: int, low_water: int) -> int:
    """Sequence numbers between two marks: a step leaves `low_water` of `size` units (plain chats)."""
    return size - low_water + 1


def stepped_start(first_seqs: Sequence[int], *, size: int, low_water: int) -> int:
    """The index of the window's first unit among units opening at `first_seqs` (oldest first).

    The window starts at the oldest mark (a seq of 1 + k·stride) that fewer than `size`
    units follow, or exactly `size` units opening at the mark itself. The rule reads only
    the units at or after the mark, so the newest `size` units of a longer history give the
    same start as the whole of it. With `low_water == size` this is the newest `size` units.
    """
    count = len(first_seqs)
    if count < size:
        return 0
    stride = stride_of(size, low_water)
    mark = 1 + max(first_seqs[0] - 1, 0) // stride * stride
    index = 0
    while True:
        while index < count and first_seqs[index] < mark:
            index += 1
        following = count - index
        if following < size or (following == size and first_seqs[index] == mark):
            return index
        mark += stride


def step_up(first_seqs: Sequence[int], index: int, stride: int) -> int:
    """`index` moved up to the first unit at or after the next mark (a window dropping in steps)."""
    if index <= 0 or index >= len(first_seqs):
        return index
    mark = 1 + (first_seqs[index - 1] - 1) // stride * stride + stride
    while index < len(first_seqs) and first_seqs[index] < mark:
        index += 1
    return index


def step_mark(first_seq: int, stride: int) -> int:
    """The mark the window starting at `first_seq` belongs to: the newest at or before it."""
    return 1 + max(first_seq - 1, 0) // stride * stride
