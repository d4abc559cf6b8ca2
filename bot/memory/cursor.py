"""The per-session offload cursor: which messages are already in memory.

The cursor is (last offloaded seq, fingerprint of that message). If the message
at that seq is gone or differs (a replaced database, an import over the
session), the cursor no longer describes this transcript: offloading starts
again from the beginning, and de-duplication keeps repeats out of memory.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from bot.storage.memory_store import MemoryStore
from bot.storage.models import Message


@dataclass(frozen=True)
class CursorSlice:
    """The messages after the cursor, and what the commit must compare against."""

    expected_seq: int | None  # the cursor's stored seq; None before the first offload
    messages: list[Message]
    reset: bool  # the stored cursor did not match the transcript


def fingerprint(message: Message) -> str:
    digest = hashlib.sha256(f"{message.role}\x00{message.content}".encode())
    return digest.hexdigest()[:32]


def slice_after_cursor(store: MemoryStore, session_id: str) -> CursorSlice:
    cursor = store.cursor(session_id)
    if cursor is None:
        return CursorSlice(None, store.messages_after(session_id, 0), reset=False)
    anchor = store.message_at(session_id, cursor.last_seq)
    if anchor is None or fingerprint(anchor) != cursor.fingerprint:
        return CursorSlice(cursor.last_seq, store.messages_after(session_id, 0), reset=True)
    return CursorSlice(cursor.last_seq, store.messages_after(session_id, cursor.last_seq), reset=False)
