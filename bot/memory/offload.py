"""Continuous offload: new transcript text → filter → tags / distill → de-duplicate → store.

Items and the cursor move together in one transaction after distillation
succeeded, so a failed model call or a crash leaves the cursor where it was
(the same messages are offered again next time) and a stored range is never
distilled twice. A backlog is offloaded in chunks (each the size of one trigger)
until the cursor catches up; each chunk commits on its own.

Items are dated by the messages they came from, and a relative date in them
("yesterday") is written out against that date. With dense recall on, the
chunk's messages and items are embedded here, in the background job.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.config import MemorySettings
from bot.memory.cursor import CursorSlice, fingerprint, slice_after_cursor
from bot.memory.dense import Embedder, embedded_text, off_loop, to_blob
from bot.memory.distill import Distiller, KnownItem, SourceBlock
from bot.memory.filters import extract_memory_tag, hard_filter, is_duplicate, is_no_update
from bot.memory.items import DistilledItem
from bot.memory.slots import slot_of
from bot.memory.tags import items_from_tag
from bot.memory.triggers import Pending, first_chunk, measure, should_offload
from bot.providers.after_turn import PrefixOnce
from bot.providers.demo import DemoProvider
from bot.search_dates import relative_mentions
from bot.search_terms import content_key, similarity_tokens
from bot.storage.boundary import boundary_for
from bot.storage.index_text import item_index_text
from bot.storage.memory_cursors import CursorMoved
from bot.storage.memory_items import NewMemoryItem
from bot.storage.memory_models import MemoryItem
from bot.storage.memory_store import MemoryStore
from bot.storage.models import ChatSession, Message
from bot.storage.owners import Owner
from transcript import TranscriptRow
from transcript.kinds import SAID_KINDS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OffloadResult:
    messages: int  # messages the cursor moved over
    chars_sent: int  # characters handed to the distiller
    distilled: int  # items from tags and the distiller
    written: int  # new items stored
    merged: int  # items that repeated a stored one and reinforced it
    deduped: int  # blocks and items dropped as near-duplicates of recent ones
    reset: bool  # the cursor did not match the transcript and restarted
    chunks: int = 1  # distillations it took

    def __add__(self, other: OffloadResult) -> OffloadResult:
        return OffloadResult(
            messages=self.messages + other.messages,
            chars_sent=self.chars_sent + other.chars_sent,
            distilled=self.distilled + other.distilled,
            written=self.written + other.written,
            merged=self.merged + other.merged,
            deduped=self.deduped + other.deduped,
            reset=self.reset or other.reset,
            chunks=self.chunks + other.chunks,
        )


# Current items offered to the model as ones a new item may replace, at most, and how close
# to the chunk an item must be to be offered (a shared word counts 1, being about one of the
# chunk's speakers 2): the model can only replace what it sees, and every item offered is
# tokens of the request.
KNOWN_ITEMS = 20
KNOWN_ITEM_CLOSENESS = 2
SPEAKER_CLOSENESS = 2


@dataclass(frozen=True)
class ChunkPlan:
    """A chunk due for offload: items its tags hold, blocks left to distil, recent items' tokens,
    the current items a new one may replace, and the person behind each sender of the chunk."""

    chunk: Sequence[Message]
    tagged: list[DistilledItem]
    fresh_blocks: list[SourceBlock]
    deduped: int  # blocks dropped as near-duplicates of recent items
    recent: list[frozenset[str]]
    known: list[KnownItem] = dataclasses.field(default_factory=list)
    persons: dict[str, str] = dataclasses.field(default_factory=dict)


class Offloader:
    def __init__(
        self,
        store: MemoryStore,
        distiller: Distiller,
        settings: MemorySettings,
        embedder: Embedder | None = None,
    ) -> None:
        self.store = store
        self.distiller = distiller
        self.settings = settings
        self.embedder = embedder
        self.db = boundary_for(store.database)
        self._locks: dict[str, asyncio.Lock] = {}

    def pending(self, session_id: str) -> Pending:
        return measure(slice_after_cursor(self.store, session_id).messages)

    def due_after(self, session_id: str, newest: Sequence[TranscriptRow]) -> bool:
        """Whether a trigger is reached, given the session's `newest` conversation rows
        (oldest first, none left out between them): the check a turn makes so that the
        offload job is enqueued only when it has a chunk to offload.

        One read (the cursor); the rows after it are counted from `newest`. When they do
        not reach back to the cursor, the backlog is not known here: due, and the job
        reads it. (The job also checks the cursor against its message, so a transcript
        replaced under the cursor is found at the next offload the triggers bring.)
        """
        after = self.store.cursor_seq(session_id) or 0
        if not newest or newest[0].seq > after + 1:
            return True
        return should_offload(measure([row for row in newest if row.seq > after]), self.settings)

    def skip_pending(self, session: ChatSession) -> int:
        """Move the cursor past everything said so far without distilling it (run on a database
        thread): after `/forget me`, what was said before is never distilled into memory again.
        The messages themselves stay in the transcript. Returns how many were skipped."""
        pending = slice_after_cursor(self.store, session.id)
        if not pending.messages:
            return 0
        last = pending.messages[-1]
        try:
            self.store.commit_offload(
                session, pending.expected_seq, last.seq, fingerprint(last), [], deduped=0, reset=False
            )
        except CursorMoved:
            # An offload running now stores what it distilled; its items are forgotten next time.
            return 0
        return len(pending.messages)

    async def offload(
        self,
        session: ChatSession,
        *,
        force: bool = False,
        embed: bool = True,
        prefix: PrefixOnce | None = None,
    ) -> OffloadResult | None:
        """Offload what is pending, chunk by chunk, while a trigger is reached (or all, with `force`).

        None when nothing was due. Raises whatever the distiller raises; the
        cursor then stays after the last chunk that was stored. With `embed` off the
        chunks are stored without vectors, for the backfill to embed later (the flush
        at shutdown, which must end in time, leaves the encoder's work to the next start).
        `prefix`: the conversation's last request, which the distiller's requests start with.
        """
        lock = self._locks.setdefault(session.id, asyncio.Lock())
        owner = Owner.of(session)
        async with lock:
            # After most turns no trigger is reached: the read and that check are one hop.
            cut, plan = await self.db.run(self._slice_and_plan, owner, session.id, force)
            expected, reset, remaining = cut.expected_seq, cut.reset, cut.messages
            total: OffloadResult | None = None
            # Each step is a hop off the loop, so a long backlog shares the event loop between chunks.
            while plan is not None:
                result = await self._offload_chunk(session, expected, plan, reset, embed, prefix)
                if result is None:
                    break
                total = result if total is None else total + result
                expected, reset, remaining = plan.chunk[-1].seq, False, remaining[len(plan.chunk) :]
                plan = await self.db.run(self._plan_chunk, owner, remaining, force) if remaining else None
            return total

    def _slice_and_plan(
        self, owner: Owner, session_id: str, force: bool
    ) -> tuple[CursorSlice, ChunkPlan | None]:
        """The messages after the cursor, and the first chunk due among them."""
        cut = slice_after_cursor(self.store, session_id)
        return cut, self._plan_chunk(owner, cut.messages, force) if cut.messages else None

    def _plan_chunk(self, owner: Owner, remaining: Sequence[Message], force: bool) -> ChunkPlan | None:
        """The next chunk if a trigger is reached, filtered and checked against recent items.

        CPU work (trigger counts, filters, similarity), run on the database thread
        with the read of recent items, as a turn's context build is.
        """
        pending = measure(remaining)
        if not (should_offload(pending, self.settings) or (force and pending.any)):
            return None
        chunk = first_chunk(remaining, self.settings)
        tagged, blocks = split_tagged(chunk)
        current = self.store.recent_items(owner, self.settings.recent_window)
        recent = [similarity_tokens(item.content) for item in current]
        threshold = self.settings.dedup_threshold
        fresh_blocks = [block for block in blocks if not is_duplicate(block.text, recent, threshold)]
        persons = self.store.person_ids([message.sender_id for message in chunk if message.sender_id])
        return ChunkPlan(
            chunk,
            tagged,
            fresh_blocks,
            len(blocks) - len(fresh_blocks),
            recent,
            known_items(current, recent, fresh_blocks),
            persons,
        )

    def _keep_new(self, plan: ChunkPlan, distilled: list[DistilledItem]) -> tuple[list[NewMemoryItem], int]:
        """The items that repeat no recent one, in stored form, and how many were dropped in all."""
        recent = list(plan.recent)
        deduped = plan.deduped
        kept: list[DistilledItem] = []
        for item in [*plan.tagged, *distilled]:
            if is_duplicate(item.content, recent, self.settings.dedup_threshold):
                deduped += 1
                continue
            recent.append(similarity_tokens(item.content))
            kept.append(item)
        return [to_new_item(item, plan.chunk, plan.persons) for item in kept], deduped

    async def _offload_chunk(
        self,
        session: ChatSession,
        expected_seq: int | None,
        plan: ChunkPlan,
        reset: bool,
        embed: bool,
        prefix: PrefixOnce | None,
    ) -> OffloadResult | None:
        distilled: list[DistilledItem] = []
        if plan.fresh_blocks:
            distilled = await self.distiller.distill(
                plan.fresh_blocks, self.settings.max_items, session, plan.known, prefix
            )
        new_items, deduped = await self.db.run(self._keep_new, plan, distilled)
        message_vectors: list[tuple[int, bytes]] = []
        if self.embedder is not None and embed:
            # Embedding is CPU work (numpy): its own thread, not the event loop or the database's.
            new_items, message_vectors = await off_loop(self._embed, new_items, plan.chunk)
        last = plan.chunk[-1]
        try:
            counts = await self.db.run(
                self.store.commit_offload,
                session,
                expected_seq,
                last.seq,
                fingerprint(last),
                new_items,
                deduped=deduped,
                reset=reset,
                message_vectors=message_vectors,
            )
        except CursorMoved:
            log.info("memory offload of session %s skipped: another worker stored it", session.id)
            return None
        return OffloadResult(
            messages=len(plan.chunk),
            chars_sent=sum(len(block.text) for block in plan.fresh_blocks),
            distilled=len(plan.tagged) + len(distilled),
            written=counts.written,
            merged=counts.merged,
            deduped=deduped,
            reset=reset,
        )

    def _embed(
        self, items: list[NewMemoryItem], chunk: Sequence[Message]
    ) -> tuple[list[NewMemoryItem], list[tuple[int, bytes]]]:
        assert self.embedder is not None
        said = [
            message
            for message in chunk
            if message.kind in SAID_KINDS and message.content.strip() and message.id is not None
        ]
        texts = [item.content for item in items] + [
            embedded_text(message.sender_name, message.content) for message in said
        ]
        vectors = list(self.embedder.embed(texts)) if texts else []
        embedded_items = [
            dataclasses.replace(item, embedding=to_blob(vector))
            for item, vector in zip(items, vectors, strict=False)
        ]
        message_vectors = [
            (message.id or 0, to_blob(vector))
            for message, vector in zip(said, vectors[len(items) :], strict=True)
        ]
        return embedded_items, message_vectors


def split_tagged(messages: Sequence[Message]) -> tuple[list[DistilledItem], list[SourceBlock]]:
    """Items from `<memory>` tags (taken as they are) and filtered blocks to distill."""
    tagged: list[DistilledItem] = []
    blocks: list[SourceBlock] = []
    for message in messages:
        if message.kind not in SAID_KINDS:
            # Tool calls and results are steps of a turn, not something anyone said.
            continue
        if message.role == "assistant" and message.model == DemoProvider.name:
            # The offline demo describes the request it got ("My context holds 1,691 of …
            # tokens"): nothing in it is true of the person or lasts.
            continue
        tag = extract_memory_tag(message.content) if message.role == "assistant" else None
        if tag is not None:
            # The model distilled this reply itself; the rest of it is explanation.
            if not is_no_update(tag):
                tagged.extend(items_from_tag(tag, message.seq))
            continue
        cleaned = hard_filter(message.content)
        if cleaned:
            blocks.append(
                SourceBlock(
                    message.seq,
                    message.sender_name or message.role,
                    cleaned,
                    from_person=message.role == "user",
                )
            )
    return tagged, blocks


def known_items(
    current: Sequence[MemoryItem], tokens: Sequence[frozenset[str]], blocks: Sequence[SourceBlock]
) -> list[KnownItem]:
    """The current items closest to the chunk: about its speakers, sharing its words (see
    KNOWN_ITEMS); the closest first, then the newest."""
    said: set[str] = set()
    for block in blocks:
        said |= similarity_tokens(block.text)
    speakers = {block.speaker.lower() for block in blocks if block.speaker and block.from_person}

    def closeness(n: int) -> int:
        person = (current[n].about or current[n].said_by_name or "").lower()
        return len(tokens[n] & said) + (SPEAKER_CLOSENESS if person in speakers else 0)

    close = [(closeness(n), n) for n in range(len(current))]
    best = sorted((entry for entry in close if entry[0] >= KNOWN_ITEM_CLOSENESS), key=lambda e: (-e[0], e[1]))
    known: list[KnownItem] = []
    for _, n in best[:KNOWN_ITEMS]:
        identifier = current[n].id
        if identifier is not None:
            known.append(KnownItem(identifier, current[n].content))
    return known


def to_new_item(item: DistilledItem, chunk: Sequence[Message], persons: dict[str, str]) -> NewMemoryItem:
    """The stored form of an item: its source range (the whole chunk when unknown) and date,
    whom it is about and who said it, and (for items the rules or tags made) its slot."""
    first = item.seq if item.seq is not None else chunk[0].seq
    last = item.last_seq if item.last_seq is not None else (first if item.seq is not None else chunk[-1].seq)
    said_at = next((message.created_at for message in chunk if message.seq == first), None)
    content = with_resolved_dates(item.content, said_at)
    speaker = next(
        (
            message
            for message in chunk
            if message.role == "user"
            and message.sender_name is not None
            and message.sender_name == item.said_by
            and first <= message.seq <= last
        ),
        None,
    )
    said_by = persons.get(speaker.sender_id) if speaker is not None and speaker.sender_id else None
    about = item.about or (speaker.sender_name if speaker is not None else None)
    # The model names the items a new one replaces; the rules find them by slot.
    slot = slot_of(item.content, about) if item.source != "model" else None
    return NewMemoryItem(
        kind=item.kind,
        content=content,
        search_text=item_index_text(content, said_at),
        content_key=content_key(item.content),
        importance=item.importance,
        source=item.source,
        source_seq=first,
        source_last_seq=last,
        said_at=said_at,
        about=about,
        said_by=said_by,
        said_by_name=speaker.sender_name if speaker is not None else None,
        slot=slot,
        replaces=item.replaces,
    )


def with_resolved_dates(content: str, said_at: datetime | None) -> str:
    """ "I moved last year" said in 2023 is kept as "I moved last year (last year = 2022)"."""
    if said_at is None:
        return content
    resolved = [
        f"{mention.phrase} = {mention.span.label()}" for mention in relative_mentions(content, said_at.date())
    ]
    return f"{content} ({'; '.join(resolved)})" if resolved else content
