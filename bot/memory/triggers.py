"""When to offload: N turns, N characters or N steps since the cursor.

Counts are recomputed from the stored messages after the cursor, so they
survive restarts and agree between processes. In a chat bot:
- a turn is one answered exchange: each assistant reply counts one;
- a step is each stored turn event: every user or assistant message, including
  group messages recorded without a reply (a busy group where the bot is rarely
  addressed has steps but few turns, as a long tool run has in the seed);
- characters are those left after the hard filter (code and tool noise do not count).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.config import MemorySettings
from bot.memory.filters import hard_filter
from bot.storage.models import Message


@dataclass(frozen=True)
class Pending:
    turns: int
    chars: int
    steps: int

    @property
    def any(self) -> bool:
        return self.turns > 0 or self.chars > 0 or self.steps > 0


def measure(messages: Sequence[Message]) -> Pending:
    return Pending(
        turns=sum(1 for message in messages if message.role == "assistant"),
        chars=sum(len(hard_filter(message.content)) for message in messages),
        steps=len(messages),
    )


def should_offload(pending: Pending, settings: MemorySettings) -> bool:
    return (
        pending.turns >= settings.turns_threshold
        or pending.chars >= settings.chars_threshold
        or pending.steps >= settings.steps_threshold
    )
