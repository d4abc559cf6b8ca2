"""The 1–3 line memory snapshot injected into every turn's system preamble.

Only items that hold now are in it (a replaced item is history), each attributed to
whom it is about and who said it, so a group's snapshot never leaves "who?" open.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.storage.memory_models import MemoryItem

# Shorter lines read as noise; 120 characters keep a decision's reason attached.
SNAPSHOT_LINE_CHARS = 120


def shorten(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def attribution(text: str, about: str | None, said_by: str | None) -> str | None:
    """Whom an item is about and who said it, as shown before its text; None when the text
    names them already ("Priya: I moved to Bristol") or nobody is known."""
    if about and said_by and about.lower() != said_by.lower():
        return f"about {about}, said by {said_by}"
    name = about or said_by
    if not name or text.lower().startswith(f"{name.lower()}:"):
        return None
    return name


def attributed(text: str, about: str | None, said_by: str | None) -> str:
    who = attribution(text, about, said_by)
    if who is None:
        return text
    return f"({who}) {text}" if who.startswith("about ") else f"{who}: {text}"


def snapshot_line(item: MemoryItem) -> str:
    text = attributed(item.content, item.about, item.said_by_name)
    return f"- [{item.kind}] {shorten(text, SNAPSHOT_LINE_CHARS)}"


def build_snapshot(items: Sequence[MemoryItem]) -> str:
    """One line per item that holds, newest first; empty when there is no memory yet."""
    return "\n".join(snapshot_line(item) for item in items if item.current)
