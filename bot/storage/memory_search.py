"""Full-text recall: an owner's memory items and stored messages that match a query.

A part of `MemoryStore`. SQLite ranks with FTS5's bm25, PostgreSQL with `ts_rank`
weighted the same way (`postgres_search`). The model's current window is left out:
recall finds what the window no longer holds.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.engine import Engine as DatabaseEngine

from bot.storage.index_text import owner_token
from bot.storage.owners import Owner
from transcript.kinds import SAID_KINDS

# Rows of the current window that may be ranked before being left out.
WINDOW_ALLOWANCE = 40
SOURCES = ("memory", "message")


@dataclass(frozen=True)
class RecallHit:
    """One search result: a memory item or a stored message outside the window."""

    source: str  # "memory" | "message"
    id: int
    text: str
    label: str  # the item's kind, or the message's role
    session_id: str
    seq: int | None  # the message's seq, or the first seq of the item's source messages
    last_seq: int | None  # the last seq of the item's source messages (a message: its own)
    said_at: datetime | None  # when the message (or the item's source) was said
    sender_name: str | None  # who said the message; None for items (their text names the speaker)
    score: float  # higher is more relevant
    # The message right after a message that asks a question (its answer, most often);
    # `last_seq` then is the reply's seq.
    reply: RecallHit | None = None
    # An item's subject and speaker, and the newer item that replaced it (with when it stopped
    # holding); None for messages and for items that hold.
    about: str | None = None
    said_by_name: str | None = None
    superseded_by: int | None = None
    valid_until: datetime | None = None


class MemorySearch:
    """Full-text search and reads of recall hits (a part of `MemoryStore`)."""

    database: DatabaseEngine

    def full_text(
        self,
        owner: Owner,
        terms: Sequence[str],
        candidates: int,
        *,
        window_session_id: str | None = None,
        window_from_seq: int | None = None,
        include_messages: bool = True,
    ) -> dict[str, list[RecallHit]]:
        """Memory items and stored messages of `owner` matching any of `terms`, each list best first.

        Messages of `window_session_id` from `window_from_seq` on are the model's
        current window and are left out. Scores are each backend's own relevance
        (bm25 or ts_rank): comparable within a list, not across lists.
        """
        ranked: dict[str, list[RecallHit]] = {source: [] for source in SOURCES}
        if not terms or candidates <= 0:
            return ranked
        params: dict[str, Any] = {
            "owner_kind": owner.kind,
            "owner_id": owner.id,
            **_window(window_session_id, window_from_seq),
            # The window's own messages match their query best; they are taken out
            # after ranking, so rank enough to still have `candidates` left.
            "candidates": candidates + (WINDOW_ALLOWANCE if window_session_id is not None else 0),
        }
        if self.database.dialect.name == "postgresql":
            params.update({f"term_{n}": term for n, term in enumerate(terms)})
            statement = {source: postgres_search(source, len(terms)) for source in ("memory", "messages")}
        else:
            # The owner token narrows the match inside the index (see migration 0003).
            owner_match = f'owner:"{owner_token(owner.kind, owner.id)}"'
            any_term = " OR ".join(f'"{term}"' for term in terms)
            params["memory_query"] = f"{owner_match} AND search_text:({any_term})"
            params["message_query"] = f"{owner_match} AND content:({any_term})"
            statement = _SQLITE_SEARCH
        parts = [statement["memory"]] + ([statement["messages"]] if include_messages else [])
        sql = " UNION ALL ".join(f"SELECT * FROM ({part}) AS part_{n}" for n, part in enumerate(parts))
        with self.database.connect() as connection:
            rows = connection.execute(text(sql), params).all()
        # Ranked beyond `candidates` (the window's allowance), but only the best of each
        # source become hits: converting a row costs more than ranking it.
        for row in sorted(rows, key=lambda row: float(row.score), reverse=True):
            hits = ranked[row.source]
            if float(row.score) > 0 and len(hits) < candidates:
                hits.append(_hit(row))
        return ranked

    def hits_by_id(
        self,
        owner: Owner,
        source: str,
        ids: Sequence[int],
        *,
        window_session_id: str | None = None,
        window_from_seq: int | None = None,
    ) -> list[RecallHit]:
        """The owner's items or messages with these ids, in the order given (missing ones left out)."""
        if not ids:
            return []
        sql = (_ITEMS_BY_ID if source == "memory" else _MESSAGES_BY_ID).bindparams(
            bindparam("ids", expanding=True)
        )
        params = {
            "owner_kind": owner.kind,
            "owner_id": owner.id,
            "ids": list(ids),
            **_window(window_session_id, window_from_seq),
        }
        with self.database.connect() as connection:
            found = {int(row.id): _hit(row) for row in connection.execute(sql, params)}
        return [found[identifier] for identifier in ids if identifier in found]

    def speaker_names(self, owner: Owner) -> set[str]:
        """The names the owner's people spoke under, lower-cased (each word of them too)."""
        with self.database.connect() as connection:
            rows = connection.execute(_SPEAKER_NAMES, {"owner_kind": owner.kind, "owner_id": owner.id}).all()
        names: set[str] = set()
        for (name,) in rows:
            if name:
                names.add(name.lower())
                names.update(part for part in name.lower().split() if len(part) > 1)
        return names

    def newest_user_seq(self, session_id: str) -> int | None:
        """The seq of the session's newest message from a person (a turn's question, during the turn)."""
        with self.database.connect() as connection:
            found = connection.execute(_NEWEST_USER_SEQ, {"session_id": session_id}).scalar()
        return None if found is None else int(found)

    def following_messages(
        self,
        owner: Owner,
        places: Sequence[tuple[str, int]],
        *,
        window_session_id: str | None = None,
        window_from_seq: int | None = None,
    ) -> dict[tuple[str, int], RecallHit]:
        """The owner's message right after each (session, seq), outside the window, keyed by that place."""
        found: dict[tuple[str, int], RecallHit] = {}
        by_session: dict[str, list[int]] = {}
        for session_id, seq in places:
            by_session.setdefault(session_id, []).append(seq + 1)
        with self.database.connect() as connection:
            for session_id, seqs in by_session.items():
                params = {
                    "owner_kind": owner.kind,
                    "owner_id": owner.id,
                    "session_id": session_id,
                    "seqs": seqs,
                    **_window(window_session_id, window_from_seq),
                }
                for row in connection.execute(_MESSAGES_AT, params):
                    found[(session_id, int(row.seq) - 1)] = _hit(row)
        return found


def _window(session_id: str | None, from_seq: int | None) -> dict[str, Any]:
    return {
        "window_session": session_id or "",
        "window_from": from_seq if from_seq is not None else 2**62,
    }


def _hit(row: Any) -> RecallHit:
    return RecallHit(
        source=row.source,
        id=int(row.id),
        text=row.content,
        label=row.label,
        session_id=row.session_id,
        seq=row.seq,
        last_seq=row.last_seq,
        said_at=None if row.said_at is None else _as_datetime(row.said_at),
        sender_name=row.sender_name,
        score=float(row.score),
        about=row.about,
        said_by_name=row.said_by_name,
        superseded_by=None if row.superseded_by is None else int(row.superseded_by),
        valid_until=None if row.valid_until is None else _as_datetime(row.valid_until),
    )


_ITEM_COLUMNS = (
    "'memory' AS source, m.id AS id, m.content AS content, m.kind AS label, m.session_id AS session_id, "
    "m.source_seq AS seq, m.source_last_seq AS last_seq, m.said_at AS said_at, NULL AS sender_name, "
    "m.about AS about, m.said_by_name AS said_by_name, m.superseded_by AS superseded_by, "
    "m.valid_until AS valid_until"
)
_MESSAGE_COLUMNS = (
    "'message' AS source, g.id AS id, g.content AS content, g.role AS label, g.session_id AS session_id, "
    "g.seq AS seq, g.seq AS last_seq, g.created_at AS said_at, g.sender_name AS sender_name, "
    # Typed, so PostgreSQL's union with the items' columns matches them.
    "CAST(NULL AS VARCHAR) AS about, CAST(NULL AS VARCHAR) AS said_by_name, "
    "CAST(NULL AS INTEGER) AS superseded_by, CAST(NULL AS TIMESTAMP) AS valid_until"
)
# What was said (search and embeddings), not tool calls and results.
IS_SAID = f"g.kind IN ({', '.join(repr(kind) for kind in sorted(SAID_KINDS))})"
_OUTSIDE_WINDOW = "NOT (g.session_id = :window_session AND g.seq >= :window_from)"
# bm25() is lower-is-better; it is negated so both backends rank by a higher score.
# The owner column gets weight 0: it narrows the match and takes no part in ranking.
_SQLITE_SEARCH = {
    "memory": (
        f"SELECT {_ITEM_COLUMNS}, hits.score AS score "
        "FROM (SELECT rowid, -bm25(memory_items_fts, 0.0, 1.0) AS score FROM memory_items_fts "
        "WHERE memory_items_fts MATCH :memory_query ORDER BY score DESC LIMIT :candidates) AS hits "
        "JOIN memory_items m ON m.id = hits.rowid "
        "WHERE m.owner_kind = :owner_kind AND m.owner_id = :owner_id"
    ),
    "messages": (
        f"SELECT {_MESSAGE_COLUMNS}, hits.score AS score "
        "FROM (SELECT rowid, -bm25(messages_fts, 0.0, 1.0) AS score FROM messages_fts "
        "WHERE messages_fts MATCH :message_query ORDER BY score DESC LIMIT :candidates) AS hits "
        "JOIN messages g ON g.id = hits.rowid JOIN sessions s ON s.id = g.session_id "
        f"WHERE s.owner_kind = :owner_kind AND s.owner_id = :owner_id AND {_OUTSIDE_WINDOW}"
    ),
}
# PostgreSQL's text-search configuration: English stemming, as SQLite's porter tokenizer
# (the stored `search_vector` columns of migration 0015 are computed with it; queries too).
POSTGRES_SEARCH_CONFIG = "english"
# The index text (the same SQLite's index holds) as a vector, stored with the row.
_POSTGRES_MESSAGE_TEXT = "f.search_vector"
_POSTGRES_ITEM_TEXT = "m.search_vector"
_HIT_COLUMNS = (
    "source, id, content, label, session_id, seq, last_seq, said_at, sender_name, "
    "about, said_by_name, superseded_by, valid_until"
)
# Per source on PostgreSQL: the hit's columns, its text as a vector, and the owner's rows.
_POSTGRES_SOURCES = {
    "memory": (
        _ITEM_COLUMNS,
        _POSTGRES_ITEM_TEXT,
        "FROM memory_items m WHERE m.owner_kind = :owner_kind AND m.owner_id = :owner_id",
    ),
    "messages": (
        _MESSAGE_COLUMNS,
        _POSTGRES_MESSAGE_TEXT,
        "FROM messages_fts f JOIN messages g ON g.id = f.message_id JOIN sessions s ON s.id = g.session_id "
        f"WHERE s.owner_kind = :owner_kind AND s.owner_id = :owner_id AND {IS_SAID}",
    ),
}
# The window's messages are left out after matching, as on SQLite.
_OUTSIDE_WINDOW_MATCHED = "NOT (session_id = :window_session AND seq >= :window_from)"


@functools.lru_cache(maxsize=32)
def postgres_search(source: str, terms: int) -> str:
    """The search of one source for `terms` query terms (`:term_0` …), ranked as bm25 ranks.

    `ts_rank` alone weighs every matched word alike, so a common word ranks a row as high
    as a rare one; SQLite's bm25 weighs each word by its inverse document frequency. Here
    each term's `ts_rank` is weighted the same way, from how many of the owner's rows hold
    it (counted over the rows that match the query) and how many rows the owner has.
    """
    columns, vector, owned = _POSTGRES_SOURCES[source]
    queries = [f"to_tsquery('{POSTGRES_SEARCH_CONFIG}', :term_{n})" for n in range(terms)]
    any_term = " || ".join(queries)
    holding = ", ".join(
        f"count(*) FILTER (WHERE vector @@ {query})::float8 AS held_{n}" for n, query in enumerate(queries)
    )
    # Each term's weight once per search, in float8 (a materialised one-row table): written
    # into the score, it was computed in numeric for every matched row, most of the
    # search's time when a common word (a speaker's name) matched hundreds of rows.
    weights = ", ".join(
        f"ln(1 + (everyone.rows - held.held_{n} + 0.5) / (held.held_{n} + 0.5)) AS weight_{n}"
        for n in range(terms)
    )
    weighted = " + ".join(f"weights.weight_{n} * ts_rank(vector, {query})" for n, query in enumerate(queries))
    window = f" WHERE {_OUTSIDE_WINDOW_MATCHED}" if source == "messages" else ""
    return (
        f"WITH matched AS MATERIALIZED "
        f"(SELECT {columns}, {vector} AS vector {owned} AND {vector} @@ ({any_term})), "
        f"held AS (SELECT {holding} FROM matched), "
        f"everyone AS (SELECT count(*)::float8 AS rows {owned}), "
        f"weights AS MATERIALIZED (SELECT {weights} FROM held CROSS JOIN everyone) "
        f"SELECT {_HIT_COLUMNS}, {weighted} AS score FROM matched CROSS JOIN weights"
        f"{window} ORDER BY score DESC LIMIT :candidates"
    )


_ITEMS_BY_ID = text(
    f"SELECT {_ITEM_COLUMNS}, 0.0 AS score FROM memory_items m WHERE m.id IN :ids "
    "AND m.owner_kind = :owner_kind AND m.owner_id = :owner_id"
)
_MESSAGES_AT = text(
    f"SELECT {_MESSAGE_COLUMNS}, 0.0 AS score FROM messages g JOIN sessions s ON s.id = g.session_id "
    "WHERE g.session_id = :session_id AND g.seq IN :seqs AND g.role != 'system' "
    f"AND s.owner_kind = :owner_kind AND s.owner_id = :owner_id AND {_OUTSIDE_WINDOW}"
).bindparams(bindparam("seqs", expanding=True))
_SPEAKER_NAMES = text(
    "SELECT DISTINCT g.sender_name FROM messages g JOIN sessions s ON s.id = g.session_id "
    "WHERE s.owner_kind = :owner_kind AND s.owner_id = :owner_id AND g.role = 'user'"
)
_NEWEST_USER_SEQ = text(
    f"SELECT max(g.seq) FROM messages g WHERE g.session_id = :session_id AND g.role = 'user' AND {IS_SAID}"
)
_MESSAGES_BY_ID = text(
    f"SELECT {_MESSAGE_COLUMNS}, 0.0 AS score FROM messages g JOIN sessions s ON s.id = g.session_id "
    f"WHERE g.id IN :ids AND s.owner_kind = :owner_kind AND s.owner_id = :owner_id AND {_OUTSIDE_WINDOW}"
)


def _as_datetime(value: Any) -> datetime:
    # Raw SQL on SQLite returns the stored text; PostgreSQL returns a datetime.
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
