"""Splitting replies to fit a platform's message limit without breaking code fences."""

from __future__ import annotations

FENCE = "```"


def split_message(text: str, limit: int) -> list[str]:
    """Cut `text` into parts of at most `limit` characters.

    Cuts prefer paragraph, then line, then word boundaries. A part that ends
    inside a ``` code block closes it, and the next part reopens it with the
    same language tag, so every part renders as valid Markdown on its own.
    """
    if limit < 16:
        raise ValueError("limit too small to split sensibly")
    parts: list[str] = []
    rest = text
    reopen = ""
    while rest:
        budget = limit - len(reopen)
        if len(rest) <= budget:
            parts.append(reopen + rest)
            break
        # Leave room for a closing fence in case the cut lands inside a block.
        cut = _cut_point(rest, budget - len(FENCE) - 1)
        head, rest = rest[:cut], rest[cut:].lstrip("\n")
        part = reopen + head
        language = _open_fence_language(part)
        if language is not None:
            part = part.rstrip("\n") + "\n" + FENCE
            reopen = FENCE + language + "\n"
        else:
            reopen = ""
        parts.append(part)
    return [part for part in parts if part.strip()] or [""]


def _cut_point(text: str, budget: int) -> int:
    window = text[:budget]
    for separator in ("\n\n", "\n", " "):
        position = window.rfind(separator)
        if position > budget // 2:
            return position + len(separator)
    return budget


def _open_fence_language(text: str) -> str | None:
    """The language tag of a code block left open at the end of `text`, else None."""
    language: str | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(FENCE):
            language = stripped[len(FENCE) :].strip() if language is None else None
    return language
