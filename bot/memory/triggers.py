"""When to offload: N turns, N characters or N steps since the cursor.

Counts are recomputed from the stored messages after the cursor, so they
survive restarts and agree between processes. In a chat bot:
- a turn is one answered exchange: each persona's reply (`transcript.kinds.is_reply`) counts one;
- a step is each stored turn event: every user or assistant message, including
  group messages recorded without a reply (a busy group where the bot is rarely
  addressed has steps but few turns, as a long tool run has in the seed);
- characters are those said (not tool calls and results) left after the hard filter
  (code and tool noise do not count).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.config import MemorySettings
from bot.memory.filters import hard_filter
from bot.storage.models import Message
from transcript.kinds import SAID_KINDS, is_reply


class Counted(Protocol):
    """What the triggers read of a row: a stored `Message`, or a `TranscriptRow` a turn holds."""

    @property
    def kind(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...


@dataclass(frozen=True)
class Pending:
    turns: int
    chars: int
    steps: int

    @property
    def any(self) -> bool:
        return self.turns > 0 or self.chars > 0 or self.steps > 0


def measure(messages: Sequence[Counted]) -> Pending:
    return Pending(
        turns=sum(1 for message in messages if is_reply(message.kind, message.role)),
        chars=sum(said_chars(message) for message in messages),
        steps=len(messages),
    )


def said_chars(message: Counted) -> int:
    return len(hard_filter(message.content)) if message.kind in SAID_KINDS else 0


def should_offload(pending: Pending, settings: MemorySettings) -> bool:
    return (
        pending.turns >= settings.turns_threshold
        or pending.chars >= settings.chars_threshold
        or pending.steps >= settings.steps_threshold
    )


def first_chunk(messages: Sequence[Message], settings: MemorySettings) -> Sequence[Message]:
    """The shortest prefix of `messages` that reaches a trigger (all of them if none does).

    A long backlog — hundreds of group messages before the bot is addressed — is
    offloaded chunk by chunk, so each distillation sees a bounded excerpt and
    its item limit never drops the rest of the backlog.
    """
    turns = chars = 0
    for steps, message in enumerate(messages, 1):
        turns += is_reply(message.kind, message.role)
        chars += said_chars(message)
        if should_offload(Pending(turns, chars, steps), settings):
            return messages[:steps]
    return messages
