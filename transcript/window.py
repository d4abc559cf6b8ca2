"""Which stored rows fit in a turn: the rolling window (docs/ARCHITECTURE.md §5).

Seed 000's buildContextWindow in two steps that `build_context` runs over a turn's units
(messages and whole tool exchanges): drop the oldest until the caps fit, then start at a
user message. The costs it passes count names, attachments and the preamble as well as the text.
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
