"""Stored rows as model turns, and turns grouped into the units a window keeps or drops whole.

A unit is one message (a person's, or the assistant's answer), or one tool exchange:
the assistant message that called tools together with one result per call. A window,
a compaction, a collapse or a snip never splits an exchange: the model would reject a
`tool` message without its call, or a call without its results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from transcript.kinds import EVENT_KINDS, KIND_ROLES, UnknownMessageKind, message_role
from transcript.names import sanitise_name
from transcript.rows import AttachmentRef, StoredToolCall, TranscriptRow
from transcript.window import RowLike, row_field, row_kind

# What the model reads for a call whose result was never stored (the turn ended first).
MISSING_RESULT = "No result was stored for this call: the turn ended before the tool finished."
ERROR_PREFIX = "Error: "

Unit = tuple["Turn", ...]


@dataclass(frozen=True)
class Turn:
    """A well-formed stored row, in the model's vocabulary."""

    row: RowLike
    role: str  # "user", "assistant" or "tool"
    text: str
    name: str | None
    # The sender's display name as a content prefix, for group chats.
    prefix: str
    attachments: tuple[AttachmentRef, ...]
    tool_calls: tuple[StoredToolCall, ...] = ()
    # A tool result: the call it answers, the tool's name, and whether the tool reported an error.
    tool_call_id: str | None = None
    tool_name: str | None = None
    failed: bool = False
    # Tokens of `text` and `tool_calls` as stored at write; None once the text was cut.
    tokens: int | None = None
    # The row's `provider_blocks`, passed through untouched.
    provider_blocks: object = None

    @property
    def model_text(self) -> str:
        """The text as the model reads it: an error result says it is one."""
        return ERROR_PREFIX + self.text if self.failed else self.text


def turn_of(row: RowLike, group: bool) -> Turn | None:
    """The row as a model turn, or None when it must not reach the model.

    Raises `UnknownMessageKind` for a kind or role this package does not know: a row is
    never sent as something it might not be.
    """
    kind, role = row_kind(row), message_role(row_field(row, "role"))
    if role not in KIND_ROLES[kind]:
        raise UnknownMessageKind(f"a {kind!r} row cannot have role {role!r}")
    if kind in EVENT_KINDS:
        return None
    content = row_field(row, "content")
    if not isinstance(content, str):
        return None
    status = row_field(row, "status")
    attachments = _tuple_of(row_field(row, "attachments"), AttachmentRef)
    stored = row_field(row, "token_count")
    tokens = stored if isinstance(stored, int) and not isinstance(stored, bool) else None
    if kind == "tool_result":
        call_id = row_field(row, "tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            return None
        tool_name = row_field(row, "tool_name")
        return Turn(
            row,
            "tool",
            content,
            None,
            "",
            attachments,
            tool_call_id=call_id,
            tool_name=tool_name if isinstance(tool_name, str) else None,
            failed=status == "failed",
            tokens=tokens,
        )
    calls = _tuple_of(row_field(row, "tool_calls"), StoredToolCall) if kind == "tool_call" else ()
    if not content.strip() and not attachments and not calls:
        return None
    if role == "assistant":
        # Tagged with the persona that spoke then, not the current one, so a
        # switched-to persona does not claim its predecessor's words.
        persona = _name(row_field(row, "persona_id"))
        blocks = row_field(row, "provider_blocks")
        return Turn(
            row, "assistant", content, persona, "", attachments, calls, tokens=tokens, provider_blocks=blocks
        )
    sender = row_field(row, "sender_name")
    # Many models ignore `name`; in a group the display name must be in the text.
    prefix = f"{sender}: " if group and isinstance(sender, str) and sender else ""
    return Turn(row, "user", content, _name(sender), prefix, attachments, tokens=tokens)


class TurnMemo:
    """The turns of rows already converted, for the builds of one turn of the conversation.

    `transcript` keeps nothing between turns. A caller that builds the context several
    times in one turn (a tool round builds it again after each round, from the same rows
    and the few it stored) passes one memo to each of those builds and drops it with the
    turn. A `TranscriptRow` is immutable, so its turn stays what it was while the row
    object does; other row shapes are converted every time.
    """

    def __init__(self) -> None:
        # Keyed by the row's identity; the row is held so that no other object takes it.
        self._turns: dict[tuple[int, bool], tuple[RowLike, Turn | None]] = {}

    def turn_of(self, row: RowLike, group: bool) -> Turn | None:
        if type(row) is not TranscriptRow:
            return turn_of(row, group)
        key = (id(row), group)
        known = self._turns.get(key)
        if known is not None and known[0] is row:
            return known[1]
        turn = turn_of(row, group)
        self._turns[key] = (row, turn)
        return turn


def group_units(turns: Sequence[Turn]) -> list[Unit]:
    """Turns in units, oldest first: each call with its results right after it.

    A result whose call is not among `turns` (folded into a summary, snipped, or before
    the rows read) is left out; a call whose result is missing gets one saying so.
    """
    units: list[Unit] = []
    index = 0
    while index < len(turns):
        turn = turns[index]
        index += 1
        if turn.role == "tool":
            continue
        if not turn.tool_calls:
            units.append((turn,))
            continue
        results: dict[str, Turn] = {}
        while index < len(turns) and turns[index].role == "tool":
            answer = turns[index]
            if answer.tool_call_id is not None and answer.tool_call_id not in results:
                results[answer.tool_call_id] = answer
            index += 1
        units.append((turn, *(results.get(call.id) or _missing(turn, call) for call in turn.tool_calls)))
    return units


def as_text_exchange(unit: Unit) -> Unit:
    """An exchange as one assistant message, for a model that cannot read tool messages."""
    call = unit[0]
    if not call.tool_calls:
        return unit
    lines = [call.text] if call.text.strip() else []
    for result in unit[1:]:
        used = next((c for c in call.tool_calls if c.id == result.tool_call_id), None)
        if used is not None:
            lines.append(f"[{used.name} {used.arguments} → {result.model_text}]")
    # The provider's own blocks hold the calls this text replaces: they no longer apply.
    return (replace(call, text="\n".join(lines), tool_calls=(), tokens=None, provider_blocks=None),)


def _missing(call: Turn, used: StoredToolCall) -> Turn:
    return Turn(
        call.row, "tool", MISSING_RESULT, None, "", (), tool_call_id=used.id, tool_name=used.name, failed=True
    )


def _name(value: object) -> str | None:
    return sanitise_name(value) if isinstance(value, str) and value else None


Item = TypeVar("Item")


def _tuple_of(value: object, kind: type[Item]) -> tuple[Item, ...]:
    return tuple(
        item for item in (value if isinstance(value, tuple | list) else ()) if isinstance(item, kind)
    )
