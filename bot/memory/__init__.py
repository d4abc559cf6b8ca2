"""Long-term memory: continuous offload of durable facts, and recall (docs/ARCHITECTURE.md §7).

Owns offload triggers and the per-session cursor, the hard filter, `<memory>` tag
parsing, the rule-based and model distillers, de-duplication, the per-turn snapshot
and recall; its chat commands live in `bot.commands.memory`. Memory is keyed by
owner (a person or a group) and must never cross between them; it reads and writes
only through `bot.storage.memory_store` and never rewrites the transcript.
"""

from __future__ import annotations

from bot.memory.distill import Distiller, ModelDistiller, RuleDistiller, SourceBlock
from bot.memory.items import DistilledItem, MemoryKind
from bot.memory.offload import Offloader, OffloadResult
from bot.memory.recall import Recall, TurnMemory
from bot.memory.service import MemoryService, choose_distiller

__all__ = [
    "DistilledItem",
    "Distiller",
    "MemoryKind",
    "MemoryService",
    "ModelDistiller",
    "OffloadResult",
    "Offloader",
    "Recall",
    "RuleDistiller",
    "SourceBlock",
    "TurnMemory",
    "choose_distiller",
]
