"""Continuous offload: new transcript text → filter → tags / distill → de-duplicate → store.

Items and the cursor move together in one transaction after distillation
succeeded, so a failed model call or a crash leaves the cursor where it was
(the same messages are offered again next time) and a stored range is never
distilled twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from bot.config import MemorySettings
from bot.memory.cursor import fingerprint, slice_after_cursor
from bot.memory.distill import Distiller, SourceBlock
from bot.memory.filters import extract_memory_tag, hard_filter, is_duplicate, is_no_update
from bot.memory.items import DistilledItem
from bot.memory.tags import items_from_tag
from bot.memory.triggers import Pending, measure, should_offload
from bot.search_terms import content_key, search_text, similarity_tokens
from bot.storage.memory_store import CursorMoved, MemoryStore, NewMemoryItem, Owner
from bot.storage.models import ChatSession, Message

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


class Offloader:
    def __init__(self, store: MemoryStore, distiller: Distiller, settings: MemorySettings) -> None:
        self.store = store
        self.distiller = distiller
        self.settings = settings
        self._locks: dict[str, asyncio.Lock] = {}

    def pending(self, session_id: str) -> Pending:
        return measure(slice_after_cursor(self.store, session_id).messages)

    async def offload(self, session: ChatSession, *, force: bool = False) -> OffloadResult | None:
        """Offload what is pending if a trigger is reached (or anything, with `force`).

        None when nothing was due. Raises whatever the distiller raises; the
        cursor then stays where it was.
        """
        lock = self._locks.setdefault(session.id, asyncio.Lock())
        async with lock:
            cut = slice_after_cursor(self.store, session.id)
            if not cut.messages:
                return None
            pending = measure(cut.messages)
            if not (should_offload(pending, self.settings) or (force and pending.any)):
                return None
            tagged, blocks = split_tagged(cut.messages)
            owner = Owner.of(session)
            recent = [
                similarity_tokens(item.content)
                for item in self.store.recent_items(owner, self.settings.recent_window)
            ]
            threshold = self.settings.dedup_threshold
            fresh_blocks = [block for block in blocks if not is_duplicate(block.text, recent, threshold)]
            deduped = len(blocks) - len(fresh_blocks)
            distilled: list[DistilledItem] = []
            if fresh_blocks:
                distilled = await self.distiller.distill(fresh_blocks, self.settings.max_items)
            items = [*tagged, *distilled]
            kept: list[DistilledItem] = []
            for item in items:
                if is_duplicate(item.content, recent, threshold):
                    deduped += 1
                    continue
                recent.append(similarity_tokens(item.content))
                kept.append(item)
            last = cut.messages[-1]
            try:
                counts = self.store.commit_offload(
                    session,
                    cut.expected_seq,
                    last.seq,
                    fingerprint(last),
                    [to_new_item(item) for item in kept],
                    deduped=deduped,
                    reset=cut.reset,
                )
            except CursorMoved:
                log.info("memory offload of session %s skipped: another worker stored it", session.id)
                return None
            return OffloadResult(
                messages=len(cut.messages),
                chars_sent=sum(len(block.text) for block in fresh_blocks),
                distilled=len(items),
                written=counts.written,
                merged=counts.merged,
                deduped=deduped,
                reset=cut.reset,
            )


def split_tagged(messages: Sequence[Message]) -> tuple[list[DistilledItem], list[SourceBlock]]:
    """Items from `<memory>` tags (taken as they are) and filtered blocks to distill."""
    tagged: list[DistilledItem] = []
    blocks: list[SourceBlock] = []
    for message in messages:
        tag = extract_memory_tag(message.content) if message.role == "assistant" else None
        if tag is not None:
            # The model distilled this reply itself; the rest of it is explanation.
            if not is_no_update(tag):
                tagged.extend(items_from_tag(tag, message.seq))
            continue
        cleaned = hard_filter(message.content)
        if cleaned:
            blocks.append(SourceBlock(message.seq, message.sender_name or message.role, cleaned))
    return tagged, blocks


def to_new_item(item: DistilledItem) -> NewMemoryItem:
    return NewMemoryItem(
        kind=item.kind,
        content=item.content,
        search_text=search_text(item.content),
        content_key=content_key(item.content),
        importance=item.importance,
        source=item.source,
        source_seq=item.seq,
    )
