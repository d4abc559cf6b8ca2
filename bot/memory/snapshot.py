"""The 1–3 line memory snapshot injected into every turn's system preamble."""

from __future__ import annotations

from collections.abc import Sequence

from bot.storage.memory_models import MemoryItem

# Shorter lines read as noise; 120 characters keep a decision's reason attached.
SNAPSHOT_LINE_CHARS = 120


def shorten(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def snapshot_line(item: MemoryItem) -> str:
    return f"- [{item.kind}] {shorten(item.content, SNAPSHOT_LINE_CHARS)}"


def build_snapshot(items: Sequence[MemoryItem]) -> str:
    """One line per item, newest first; empty when there is no memory yet."""
    return "\n".join(snapshot_line(item) for item in items)
