"""The shape of one distilled memory item, before it is stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MemoryKind = Literal["decision", "constraint", "conclusion", "fact"]
KINDS: tuple[MemoryKind, ...] = ("decision", "constraint", "conclusion", "fact")

# Where an item came from: a `<memory>` tag the model wrote, the offline rules, or a model call.
ItemSource = Literal["tag", "rules", "model"]

# Importance on a 1–10 scale, per kind, as the seed assigns it.
BASE_IMPORTANCE: dict[MemoryKind, int] = {"decision": 7, "constraint": 7, "conclusion": 6, "fact": 5}


@dataclass(frozen=True)
class DistilledItem:
    kind: MemoryKind
    content: str
    importance: int
    source: ItemSource
    # The messages the item was taken from (first and last `seq` in the session);
    # `last_seq` None means the item came from the one message at `seq`.
    seq: int | None = None
    last_seq: int | None = None
    # Whom the item is about and who said it (names as the excerpt shows them), when known.
    about: str | None = None
    said_by: str | None = None
    # Stored items (ids) the distiller says this one updates or contradicts.
    replaces: tuple[int, ...] = ()


def clamp_importance(value: int) -> int:
    return max(1, min(10, value))
