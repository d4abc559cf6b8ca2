"""Recall: full-text search over an owner's memory items and stored messages.

Used three ways: automatically, a few hits added to each turn (one search, the
newest user message as the query, the current window left out); by `/recall`;
and by `chorus recall`. Scoped by owner, so a group never recalls private memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.config import MemorySettings
from bot.memory.snapshot import build_snapshot, shorten
from bot.search_terms import words
from bot.storage.memory_store import MemoryStore, Owner, RecallHit
from bot.storage.models import ChatSession
from transcript import CONTEXT_COUNT, TranscriptRow

RECALL_SNIPPET_CHARS = 300


@dataclass(frozen=True)
class TurnMemory:
    """What memory adds to one turn's context."""

    snapshot: str
    recall: tuple[str, ...]


def format_hit(hit: RecallHit) -> str:
    day = hit.created_at.date().isoformat()
    if hit.source == "memory":
        return f"[{hit.label}, {day}] {shorten(hit.text, RECALL_SNIPPET_CHARS)}"
    return f"[{hit.label} message, {day}] {shorten(hit.text, RECALL_SNIPPET_CHARS)}"


class Recall:
    def __init__(self, store: MemoryStore, settings: MemorySettings) -> None:
        self.store = store
        self.settings = settings

    def search(self, owner: Owner, query: str, limit: int) -> list[RecallHit]:
        """The `limit` most relevant items and messages of `owner` for `query`."""
        return self.store.search(owner, words(query), limit)

    def for_turn(self, session: ChatSession, rows: Sequence[TranscriptRow]) -> TurnMemory:
        """The snapshot of the newest items, and hits for the newest user message.

        `rows` are the rows the turn's window is built from (oldest first); the
        newest `CONTEXT_COUNT` of them are in context and are not recalled again.
        """
        owner = Owner.of(session)
        newest = self.store.recent_items(owner, self.settings.snapshot_items)
        snapshot = build_snapshot(newest)
        query = next((row.content for row in reversed(rows) if row.role == "user"), "")
        if not query or self.settings.recall_items <= 0:
            return TurnMemory(snapshot, ())
        in_snapshot = {item.id for item in newest}
        window = rows[-CONTEXT_COUNT:]
        hits = self.store.search(
            owner,
            words(query),
            self.settings.recall_items + len(in_snapshot),
            window_session_id=session.id,
            window_from_seq=window[0].seq if window else None,
        )
        fresh = [hit for hit in hits if not (hit.source == "memory" and hit.id in in_snapshot)]
        return TurnMemory(snapshot, tuple(format_hit(hit) for hit in fresh[: self.settings.recall_items]))
