"""Long-term memory: continuous offload of durable facts, and recall (docs/ARCHITECTURE.md §7).

Owns offload triggers and the per-session cursor, the hard filter, `<memory>` tag
parsing, the rule-based and model distillers, de-duplication, the per-turn snapshot
and recall; its chat commands live in `bot.commands.memory`. Memory is keyed by
owner (a person or a group) and must never cross between them; it reads and writes
only through `bot.storage.memory_store` (`MemoryStore`) and never rewrites the transcript.
"""

from __future__ import annotations

import importlib
from typing import Any

# Names are imported on first use: `chorus recall` needs recall alone, not the
# distillers and the model providers behind them.
_EXPORTS = {
    "DistilledItem": "bot.memory.items",
    "Distiller": "bot.memory.distill",
    "MemoryKind": "bot.memory.items",
    "MemoryService": "bot.memory.service",
    "ModelDistiller": "bot.memory.distill",
    "OffloadResult": "bot.memory.offload",
    "Offloader": "bot.memory.offload",
    "Recall": "bot.memory.recall",
    "RuleDistiller": "bot.memory.distill",
    "SourceBlock": "bot.memory.distill",
    "TurnMemory": "bot.memory.recall",
    "choose_distiller": "bot.memory.service",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'bot.memory' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
