"""`chorus recall SESSION QUERY [-k N] [--json]`: search the memory of a session's owner."""

from __future__ import annotations

import json

from sqlalchemy.engine import Engine as DatabaseEngine

from bot.config import MemorySettings
from bot.errors import ChorusError
from bot.memory.recall import Recall, format_hit
from bot.storage.memory_store import MemoryStore, Owner
from bot.storage.store import Store


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
    chat = Store(database).find_session(session_prefix)
    if chat is None:
        raise UnknownSession(session_prefix)
    hits = Recall(MemoryStore(database), settings).search(Owner.of(chat), query, limit)
    if as_json:
        return json.dumps(
            [
                {
                    "source": hit.source,
                    "id": hit.id,
                    "label": hit.label,
                    "text": hit.text,
                    "session_id": hit.session_id,
                    "seq": hit.seq,
                    "created_at": hit.created_at.isoformat(),
                    "score": round(hit.score, 4),
                }
                for hit in hits
            ],
            ensure_ascii=False,
            indent=2,
        )
    if not hits:
        return f"Nothing found for “{query}”."
    return "\n".join(f"{n}. {format_hit(hit)}" for n, hit in enumerate(hits, 1))
