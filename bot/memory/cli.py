"""`chorus recall SESSION QUERY [-k N] [--json]`: search the memory of a session's owner."""

from __future__ import annotations

import json

from sqlalchemy.engine import Engine as DatabaseEngine

from bot.config import MemorySettings
from bot.errors import ChorusError
from bot.memory.dense import DenseIndex, load_embedder
from bot.memory.recall import Recall, format_hit, hit_record
from bot.storage.memory_store import MemoryStore
from bot.storage.owners import Owner
from bot.storage.sessions import SessionStore


class UnknownSession(ChorusError):
    def __init__(self, prefix: str) -> None:
        super().__init__(f"no single session matches '{prefix}' (see `chorus sessions`)")


def recall_output(
    database: DatabaseEngine,
    settings: MemorySettings,
    session_prefix: str,
    query: str,
    *,
    limit: int,
    as_json: bool,
) -> str:
    """What `chorus recall` prints: numbered hits, or a JSON array with `--json`."""
    chat = SessionStore(database).find_session(session_prefix)
    if chat is None:
        raise UnknownSession(session_prefix)
    memory = MemoryStore(database)
    embedder = load_embedder() if settings.dense else None
    dense = DenseIndex(memory, embedder) if embedder is not None else None
    hits = Recall(memory, settings, dense).search(Owner.of(chat), query, limit)
    if as_json:
        return json.dumps([hit_record(hit) for hit in hits], ensure_ascii=False, indent=2)
    if not hits:
        return f"Nothing found for “{query}”."
    return "\n".join(f"{n}. {format_hit(hit)} (score {hit.score:.4f})" for n, hit in enumerate(hits, 1))


def backlog_notice(database: DatabaseEngine, settings: MemorySettings, session_prefix: str) -> str | None:
    """A line saying how far memory is behind the owner's conversations, or None when it is not.

    Messages the offload has not reached are found by full text only: their memory
    items are not distilled and (with dense recall) their vectors not computed yet.
    """
    chat = SessionStore(database).find_session(session_prefix)
    if chat is None or not settings.enabled:
        return None
    backlog = MemoryStore(database).backlog(
        Owner.of(chat), dense=settings.dense and load_embedder() is not None
    )
    parts = []
    if backlog.messages:
        where = "conversation" if backlog.sessions == 1 else f"{backlog.sessions} conversations"
        parts.append(
            f"{backlog.messages} message{'s' if backlog.messages != 1 else ''} in {where} not offloaded yet "
            "(found by full text only; their memory items and vectors come with the next offload)"
        )
    if backlog.unembedded:
        plural = "s" if backlog.unembedded != 1 else ""
        parts.append(
            f"{backlog.unembedded} offloaded message{plural} without a vector "
            "(`chorus memory reindex`, or the background pass of `chorus serve`, embeds them)"
        )
    return "Memory is behind: " + "; ".join(parts) + "." if parts else None
