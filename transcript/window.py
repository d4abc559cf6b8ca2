"""Which stored rows fit in a turn: the rolling window (docs/ARCHITECTURE.md §5).

`window` keeps the seed's buildContextWindow semantics exactly; `build_context`
reuses its two steps (drop the oldest until the caps fit, then start at a user
message) with costs that also count names, attachments and the preamble.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from transcript.kinds import CONVERSATION_KINDS, MessageKind, message_kind
from transcript.rows import TranscriptRow
from transcript.tokens import count_tokens

RowLike = TranscriptRow | Mapping[str, object]
Row = TypeVar("Row", bound=RowLike)


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
    if isinstance(row, Mapping):
        return row.get(name)
    return getattr(row, name, None)


def row_tokens(row: RowLike, content: str) -> int:
    """The row's stored token count, counting its content only when none was stored."""
    stored = row_field(row, "token_count")
    if isinstance(stored, int) and not isinstance(stored, bool):
        return stored
    return count_tokens(content)


def window(
    rows: Sequence[Row],
    *,
    max_messages: int,
    max_chars: int | None = None,
    max_tokens: int | None = None,
) -> list[Row]:
    """The rows (the original objects, oldest first) that fit in one turn's context.

    Malformed rows (role or content not a string) and events are dropped;
    then the last `max_messages` are taken; then, while more than one remains and
    the content exceeds `max_chars` characters or `max_tokens` tokens, the oldest
    is dropped; finally leading rows are dropped until the first `user` row, so
    the result may be empty. A cap of None means no cap.
    """
    if max_messages <= 0:
        raise ValueError(f"max_messages must be positive, got {max_messages}")
    cleaned: list[tuple[Row, str, str]] = []
    for row in rows:
        role, content = row_field(row, "role"), row_field(row, "content")
        if isinstance(role, str) and isinstance(content, str) and row_kind(row) in CONVERSATION_KINDS:
            cleaned.append((row, role, content))
    recent = cleaned[-max_messages:]
    limits: list[tuple[Sequence[int], int]] = []
    if max_chars is not None:
        limits.append(([len(content) for _, _, content in recent], max_chars))
    if max_tokens is not None:
        limits.append(([row_tokens(row, content) for row, _, content in recent], max_tokens))
    start = drop_oldest(limits, keep_from=len(recent) - 1)
    start = first_user(tuple(role for _, role, _ in recent), start)
    return [row for row, _, _ in recent[start:]]


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
