"""Recall: hybrid search over an owner's memory items and stored messages.

Used three ways: automatically, a few hits added to each turn (the newest user
message as the query, the current window left out, within the context budget);
by `/recall`; and by `chorus recall`. Scoped by owner, so a group never recalls
private memory.

Each source ranks on its own — full-text over items, full-text over messages
(both by bm25), and, when dense recall is on, sentence-embedding similarity over
each — and the ranked lists are merged by reciprocal-rank fusion: scores of
different sources are not on one scale, ranks are. A memory item and the message
it was distilled from are one slot: they count as one hit, shown as the message.

Rank fusion rewards agreement, so a hit that one view ranks first and the others
miss (a distilled item naming the city, while the messages talk around it) would
lose to hits every view finds half-way down. The answer to a question that spans
several moments is often such a hit: each ranked list's leading hits therefore keep
a place in the result (`LEADS_SHARE`), and the rest is filled by fused score.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from bot.config import MemorySettings
from bot.memory.dense import DenseIndex
from bot.memory.snapshot import attributed, build_snapshot, shorten
from bot.search_dates import query_date_terms, relative_mentions
from bot.search_terms import words
from bot.storage.memory_models import MemoryItem
from bot.storage.memory_search import RecallHit
from bot.storage.memory_store import MemoryStore
from bot.storage.models import ChatSession
from bot.storage.owners import Owner
from transcript import CONTEXT_COUNT, TranscriptRow, count_tokens

RECALL_SNIPPET_CHARS = 300
# The usual reciprocal-rank-fusion constant: a hit's share falls slowly with its rank,
# so agreement between lists outweighs a single list's order.
RRF_K = 60
# An item list ranks fewer, shorter rows than the message list it restates; its
# ranks count a little less, so a message is not outranked by its own summary's rank.
ITEM_WEIGHT = 0.9
# Each ranked list's first `limit * LEADS_SHARE` slots (at least one) are always in the result.
LEADS_SHARE = 0.2
# How deep each list is read before fusion, per hit asked for.
CANDIDATES_PER_HIT = 4
MIN_CANDIDATES = 20
# Hits read beyond the ones asked for, to fill the places of messages that come along
# as the reply to a question hit (see `Recall.with_replies`).
SPARE_HITS = 3
# A message's rank counts in full from this many words beyond its sender's name on
# (see `informativeness`).
INFORMATIVE_WORDS = 4
INFORMATIVE_CHARS = 160
# Hits beyond the ones asked for, per hit asked for, that the named person's weight may bring
# forward (see `with_named_first`).
NAMED_SPARE_PER_HIT = 1
# How long an owner's speaker names are trusted before they are read again.
SPEAKERS_SECONDS = 60.0
# A hit said by (or about) a person the query names counts this much more.
NAMED_PERSON_BOOST = 1.2
# Ranking costs grow with how many rows match a term, so a query keeps only its
# most distinctive words: longer words are rarer, the cheapest proxy for IDF.
MAX_QUERY_TERMS = 8


# How many replacements recall follows from an old item to the one that holds now.
MAX_SUCCESSION = 4


@dataclass(frozen=True)
class TurnMemory:
    """What memory adds to one turn's context."""

    snapshot: str
    recall: tuple[str, ...]
    # Items stored since the window's last step: they follow the history until the next one.
    new_snapshot: str = ""


def query_terms(query: str, speakers: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """The dates the query names, then its most distinctive words (at most MAX_QUERY_TERMS).

    The names of the owner's `speakers` are left out while other words remain: every message
    is indexed with its sender's name, so "What sports does Hana do?" would otherwise rank
    Hana's shortest messages ("Hana: Good for her.") first whenever no other word matches.
    """
    dates, rest = query_date_terms(query)
    unique = list(dict.fromkeys(term for term in words(rest) if term))
    content = [term for term in unique if term not in speakers]
    distinctive = sorted(content or unique, key=len, reverse=True)
    return [*dates, *distinctive][:MAX_QUERY_TERMS]


def slot(hit: RecallHit) -> tuple[str, str, int]:
    """Hits that share a slot: a message, and every item distilled from that message alone."""
    if hit.source == "message" and hit.seq is not None:
        return ("message", hit.session_id, hit.seq)
    if hit.seq is not None and hit.last_seq in (None, hit.seq):
        return ("message", hit.session_id, hit.seq)
    return ("memory", hit.session_id, hit.id)


@dataclass(frozen=True)
class Ranking:
    """One ranked list for fusion: which retriever produced it, and how much its ranks count."""

    retriever: str  # "full-text" or "dense": lists of one retriever are views of the same evidence
    weight: float
    hits: Sequence[RecallHit]


def informativeness(hit: RecallHit, speakers: frozenset[str]) -> float:
    """How much a message says beyond its sender's name, from 1/INFORMATIVE_WORDS to 1.

    A message is indexed and embedded with its sender's name, so "Good for her." by Hana
    lies close to every question about Hana; its rank counts for less than that of a
    message with something in it. Items (distilled sentences) count fully.
    """
    if not speakers or hit.source != "message":
        return 1.0
    # The weight is full from a few words on: the start of a long message decides it.
    said = {word for word in words(hit.text[:INFORMATIVE_CHARS]) if word not in speakers}
    return max(1, min(len(said), INFORMATIVE_WORDS)) / INFORMATIVE_WORDS


def with_named_first(hits: Sequence[RecallHit], query: str, speakers: frozenset[str]) -> list[RecallHit]:
    """`hits` reordered with NAMED_PERSON_BOOST for what the person the query names said
    (a message, or the reply a question carries) or what is about them (an item)."""
    named = {word for word in words(query) if word in speakers}
    if not named:
        return list(hits)

    def weight(hit: RecallHit) -> float:
        person = hit.sender_name if hit.source == "message" else (hit.about or hit.said_by_name)
        replier = hit.reply.sender_name if hit.reply is not None else None
        return NAMED_PERSON_BOOST if {(person or "").lower(), (replier or "").lower()} & named else 1.0

    return sorted((replace(hit, score=hit.score * weight(hit)) for hit in hits), key=lambda hit: -hit.score)


def fuse(
    rankings: Sequence[Ranking], limit: int, spare: int = 0, speakers: frozenset[str] = frozenset()
) -> list[RecallHit]:
    """Reciprocal-rank fusion over slots; each slot is shown by its message when one was found.

    A retriever ranks items and messages in two lists, but an item restates its
    message: a slot gets the best of its ranks within a retriever, and the
    retrievers' shares add up. Summing within a retriever would rank a message
    above a better match just because a sentence of it was also distilled.
    The leading slots of every list are kept (see the module docstring); the
    result is ordered by fused score, followed by the `spare` best of the slots
    left out (for the caller to fill in with, should some of the kept ones go).
    """
    shares: dict[tuple[str, str, int], dict[str, float]] = {}
    shown: dict[tuple[str, str, int], RecallHit] = {}
    # Per slot, whether every item found in it was replaced by a newer one (and the newest
    # replacement): a message whose facts no longer hold is shown as history.
    replaced: dict[tuple[str, str, int], RecallHit | None] = {}
    leads_per_list = max(1, round(limit * LEADS_SHARE))
    # A message is in several lists (full text and dense): its weight is worked out once.
    weights: dict[tuple[str, int], float] = {}
    leads: list[tuple[str, str, int]] = []
    for ranking in rankings:
        voted: dict[tuple[str, str, int], None] = {}  # this list's slots, in rank order
        for hit in ranking.hits:
            key = slot(hit)
            if key in voted:
                continue  # one vote per list and slot: several items of one message are one hit
            voted[key] = None
            weight = weights.get((hit.source, hit.id))
            if weight is None:
                weight = weights[(hit.source, hit.id)] = informativeness(hit, speakers)
            share = ranking.weight * weight / (RRF_K + len(voted))
            by_retriever = shares.setdefault(key, {})
            by_retriever[ranking.retriever] = max(by_retriever.get(ranking.retriever, 0.0), share)
            current = shown.get(key)
            if current is None or (current.source == "memory" and hit.source == "message"):
                shown[key] = hit
            if hit.source == "memory" and hit.label:  # an item read with its row (dense hits are not)
                before = replaced.get(key, hit)
                replaced[key] = hit if hit.superseded_by is not None and before is not None else None
        leads += list(voted)[:leads_per_list]
    scores = {key: sum(by_retriever.values()) for key, by_retriever in shares.items()}
    by_score = sorted(scores, key=lambda key: scores[key], reverse=True)
    kept = set(sorted(set(leads), key=lambda key: scores[key], reverse=True)[:limit])
    for key in by_score:
        if len(kept) >= limit:
            break
        kept.add(key)
    best = [key for key in by_score if key in kept]
    best += [key for key in by_score if key not in kept][:spare]
    return [history_of(replace(shown[key], score=scores[key]), replaced.get(key)) for key in best]


def history_of(hit: RecallHit, replaced_item: RecallHit | None) -> RecallHit:
    """A message hit whose items were all replaced carries their replacement, as an item would."""
    if replaced_item is None or hit.source != "message":
        return hit
    return replace(hit, superseded_by=replaced_item.superseded_by, valid_until=replaced_item.valid_until)


def _replaced(hit: RecallHit) -> RecallHit | None:
    return hit if hit.superseded_by is not None else None


def hit_date(hit: RecallHit) -> str:
    return hit.said_at.date().isoformat() if hit.said_at is not None else "undated"


def hit_seqs(hit: RecallHit) -> str:
    if hit.seq is None:
        return "?"
    return f"#{hit.seq}" if hit.last_seq in (None, hit.seq) else f"#{hit.seq}–{hit.last_seq}"


def hit_text(hit: RecallHit, limit: int | None = None) -> str:
    """The hit's words, a message prefixed with its sender (an item with whom it is about and
    who said it), relative dates resolved; a question's reply follows it. `limit` shortens
    the message and its reply each."""
    if hit.source == "message":
        text = f"{hit.sender_name}: {hit.text}" if hit.sender_name else hit.text
    else:
        text = attributed(hit.text, hit.about, hit.said_by_name)
    if hit.source == "message" and hit.said_at is not None:
        resolved = [
            f"{mention.phrase} = {mention.span.label()}"
            for mention in relative_mentions(hit.text, hit.said_at.date())
        ]
        if resolved:
            text = f"{text} ({'; '.join(resolved)})"
    if limit is not None:
        text = shorten(text, limit)
    return f"{text} — {hit_text(hit.reply, limit)}" if hit.reply is not None else text


def hit_record(hit: RecallHit, text_chars: int | None = None) -> dict[str, Any]:
    """One hit as JSON data: what `chorus recall --json` prints, and what the `recall` tool
    returns with fewer fields. `text_chars` cuts the hit's text and its reply's text each."""
    return {
        "kind": hit.label if hit.source == "memory" else "message",
        "source": hit.source,
        "id": hit.id,
        "session_id": hit.session_id,
        "seqs": [hit.seq, hit.last_seq if hit.last_seq is not None else hit.seq],
        "date": hit.said_at.date().isoformat() if hit.said_at is not None else None,
        "speaker": hit.sender_name,
        "text": shorten(hit.text, text_chars) if text_chars is not None else hit.text,
        "reply": (
            {
                "speaker": hit.reply.sender_name,
                "text": shorten(hit.reply.text, text_chars) if text_chars is not None else hit.reply.text,
                "seq": hit.reply.seq,
            }
            if hit.reply is not None
            else None
        ),
        "shown": hit_text(hit, text_chars),
        "score": round(hit.score, 4),
        "about": hit.about,
        "said_by": hit.said_by_name if hit.source == "memory" else hit.sender_name,
        # False for what a newer item replaced: history, kept with the day it stopped holding.
        "holds": hit.superseded_by is None,
        "until": hit.valid_until.date().isoformat() if hit.valid_until is not None else None,
        "replaced_by": hit.superseded_by,
    }


def format_hit(hit: RecallHit) -> str:
    kind = f"{hit.label} message" if hit.source == "message" else hit.label
    until = (
        f", no longer holds since {hit.valid_until:%Y-%m-%d}: replaced by memory item {hit.superseded_by}"
        if hit.superseded_by is not None and hit.valid_until is not None
        else ""
    )
    return f"[{kind} {hit_seqs(hit)}, {hit_date(hit)}{until}] {hit_text(hit, RECALL_SNIPPET_CHARS)}"


def turn_query(rows: Sequence[TranscriptRow]) -> str:
    """What a turn recalls for: the newest user message of its rows."""
    return next((row.content for row in reversed(rows) if row.role == "user"), "")


def window_start(rows: Sequence[TranscriptRow]) -> int | None:
    """The first seq of the turn's window: the newest `CONTEXT_COUNT` rows are in context."""
    window = rows[-CONTEXT_COUNT:]
    return window[0].seq if window else None


class Recall:
    def __init__(self, store: MemoryStore, settings: MemorySettings, dense: DenseIndex | None = None) -> None:
        self.store = store
        self.settings = settings
        self.dense = dense
        self._speakers: dict[Owner, tuple[float, frozenset[str]]] = {}

    def speakers(self, owner: Owner) -> frozenset[str]:
        """The owner's speaker names (lower-cased), read at most every SPEAKERS_SECONDS."""
        now = time.monotonic()
        cached = self._speakers.get(owner)
        if cached is not None and now - cached[0] < SPEAKERS_SECONDS:
            return cached[1]
        names = frozenset(self.store.speaker_names(owner))
        self._speakers[owner] = (now, names)
        return names

    def search(
        self,
        owner: Owner,
        query: str,
        limit: int,
        *,
        window_session_id: str | None = None,
        window_from_seq: int | None = None,
    ) -> list[RecallHit]:
        """The `limit` most relevant items and messages of `owner` for `query`, best first."""
        if limit <= 0 or not query.strip():
            return []
        candidates = max(limit * CANDIDATES_PER_HIT, MIN_CANDIDATES)
        if self.dense is not None:
            # The query is embedded on a thread of its own while the full-text search runs.
            self.dense.start_search(owner, query, window_session_id, window_from_seq)
        terms = query_terms(query, self.speakers(owner))
        lexical = self.store.full_text(
            owner, terms, candidates, window_session_id=window_session_id, window_from_seq=window_from_seq
        )
        if self.dense is None and not any(lexical.values()) and (every_term := query_terms(query)) != terms:
            # Nothing but the name matches ("What did Caroline share?") and no search by meaning
            # runs: the name is all there is to search with. (With dense recall the name-only
            # matches would only add the named person's shortest messages.)
            lexical = self.store.full_text(
                owner,
                every_term,
                candidates,
                window_session_id=window_session_id,
                window_from_seq=window_from_seq,
            )
        rankings = [
            Ranking("full-text", ITEM_WEIGHT, lexical["memory"]),
            Ranking("full-text", 1.0, lexical["message"]),
        ]
        if self.dense is not None:
            items, messages = self.dense.search(
                owner, query, candidates, window_session_id=window_session_id, window_from_seq=window_from_seq
            )
            known = {(hit.source, hit.id): hit for ranking in rankings for hit in ranking.hits}
            rankings += [
                Ranking(
                    "dense",
                    ITEM_WEIGHT,
                    self._with_rows(owner, items, known, window_session_id, window_from_seq),
                ),
                Ranking(
                    "dense", 1.0, self._with_rows(owner, messages, known, window_session_id, window_from_seq)
                ),
            ]
        speakers = self.speakers(owner)
        fused = fuse(rankings, limit + limit * NAMED_SPARE_PER_HIT, SPARE_HITS, speakers)
        found = self.with_successors(owner, fused)
        found = self.with_replies(owner, found, window_session_id, window_from_seq)
        return with_named_first(found, query, speakers)[:limit]

    def _with_rows(
        self,
        owner: Owner,
        hits: Sequence[RecallHit],
        known: dict[tuple[str, int], RecallHit],
        window_session_id: str | None,
        window_from_seq: int | None,
    ) -> list[RecallHit]:
        """Dense hits (ids and scores only) as stored rows, in their order: the ones full text
        read already, the rest in one query. A row gone since its vector was read (an item
        forgotten or moved to another owner) is left out."""
        missing = [hit.id for hit in hits if (hit.source, hit.id) not in known]
        source = hits[0].source if hits else "message"
        read = {
            hit.id: hit
            for hit in self.store.hits_by_id(
                owner, source, missing, window_session_id=window_session_id, window_from_seq=window_from_seq
            )
        }
        rows = []
        for hit in hits:
            row = known.get((hit.source, hit.id)) or read.get(hit.id)
            if row is not None:
                rows.append(replace(row, score=hit.score))
        return rows

    def with_successors(self, owner: Owner, hits: Sequence[RecallHit]) -> list[RecallHit]:
        """Each hit that a newer item replaced, with the item that holds now just above it.

        "Where does Priya live?" finds the words of the old fact as readily as the new:
        the one that holds must come first, and come along when only the old one matched.
        """
        holding: dict[tuple[str, int], RecallHit] = {}  # a replaced hit → the item that holds now
        for hit in hits:
            successor_id, steps = hit.superseded_by, 0
            while successor_id is not None and steps < MAX_SUCCESSION:
                successor = next(iter(self.store.hits_by_id(owner, "memory", [successor_id])), None)
                if successor is None:
                    break
                if successor.superseded_by is None:
                    holding[(hit.source, hit.id)] = replace(successor, score=hit.score)
                successor_id, steps = successor.superseded_by, steps + 1
        if not holding:
            return list(hits)
        found_items = {hit.id: hit for hit in hits if hit.source == "memory"}
        placed: set[int] = set()  # items already in the result
        result: list[RecallHit] = []
        for hit in hits:
            successor = holding.get((hit.source, hit.id))
            if successor is not None and successor.id not in placed:
                result.append(found_items.get(successor.id, successor))
                placed.add(successor.id)
            if hit.source == "memory":
                if hit.id in placed:
                    continue  # moved up above the item it replaced
                placed.add(hit.id)
            result.append(hit)
        return result

    def with_replies(
        self,
        owner: Owner,
        hits: Sequence[RecallHit],
        window_session_id: str | None,
        window_from_seq: int | None,
    ) -> list[RecallHit]:
        """Each message that asks a question, with the message after it (its answer, most often).

        In a conversation the words of a question are the words people later search
        with ("How long have you been married?"), while the answer ("5 years already!")
        shares none of them: a question alone is a hit without the fact. A message that
        comes along as a reply is not listed again on its own.
        """
        questions = [
            (hit.session_id, hit.seq)
            for hit in hits
            if hit.source == "message" and hit.seq is not None and hit.text.rstrip().endswith(("?", "？"))
        ]
        replies = (
            self.store.following_messages(
                owner, questions, window_session_id=window_session_id, window_from_seq=window_from_seq
            )
            if questions
            else {}
        )
        shown: set[tuple[str, int]] = set()
        result: list[RecallHit] = []
        for hit in hits:
            seq = hit.seq
            if hit.source == "message" and seq is not None:
                if (hit.session_id, seq) in shown:
                    continue
                reply = replies.get((hit.session_id, seq))
                if reply is not None and (hit.session_id, seq + 1) not in shown:
                    hit = replace(hit, reply=reply, last_seq=seq + 1)
                    shown.add((hit.session_id, seq + 1))
                shown.add((hit.session_id, seq))
            result.append(hit)
        return result

    def snapshot_only(self, session: ChatSession, steady_before: datetime | None = None) -> TurnMemory:
        """The snapshot `for_turn` would give, without searching for anything."""
        return self._snapshot(Owner.of(session), steady_before)[0]

    def _snapshot(self, owner: Owner, steady_before: datetime | None) -> tuple[TurnMemory, list[MemoryItem]]:
        """The snapshot, and the items in it.

        With `steady_before` (a stepped window's step, see `transcript.window_step_seq`) the
        snapshot holds the items stored by then, and those stored since are its new part.
        """
        limit = self.settings.snapshot_items
        if steady_before is None:
            newest = self.store.recent_items(owner, limit)
            return TurnMemory(build_snapshot(newest), ()), newest
        before, after = self.store.items_around(owner, steady_before, limit)
        return TurnMemory(build_snapshot(before), (), build_snapshot(after)), [*before, *after]

    def for_turn(
        self,
        session: ChatSession,
        rows: Sequence[TranscriptRow],
        token_budget: int | None = None,
        steady_before: datetime | None = None,
    ) -> TurnMemory:
        """The snapshot of the newest items, and hits for the newest user message.

        `rows` are the rows the turn's window is built from (oldest first); the
        newest `CONTEXT_COUNT` of them are in context and are not recalled again.
        Recalled lines stop at `memory.recall_budget_share` of `token_budget`.
        `steady_before` splits the snapshot at a window step (see `snapshot_only`).
        """
        owner = Owner.of(session)
        shown, newest = self._snapshot(owner, steady_before)
        query = turn_query(rows)
        if not query or self.settings.recall_items <= 0:
            return shown
        in_snapshot = {item.id for item in newest}
        hits = self.search(
            owner,
            query,
            self.settings.recall_items + len(in_snapshot),
            window_session_id=session.id,
            window_from_seq=window_start(rows),
        )
        fresh = [hit for hit in hits if not (hit.source == "memory" and hit.id in in_snapshot)]
        room = None if token_budget is None else int(token_budget * self.settings.recall_budget_share)
        lines: list[str] = []
        for hit in fresh[: self.settings.recall_items]:
            line = format_hit(hit)
            if room is not None:
                room -= count_tokens(line)
                if room < 0:
                    break
            lines.append(line)
        return replace(shown, recall=tuple(lines))
