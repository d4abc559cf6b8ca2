"""Memory's tools: `recall` and `remember`, the owner's long-term memory as the model searches and adds to it.

They share `/recall`'s search and the `<memory>` tag's way of keeping an item; the
command formats hits for people, the tool returns them as JSON.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from bot.memory.recall import hit_record
from bot.memory.service import MemoryService
from bot.storage.boundary import boundary_for
from bot.storage.memory_search import RecallHit
from bot.storage.owners import Owner
from bot.tools.base import FunctionTool, Tool, ToolContext

RECALL_DESCRIPTION = (
    "Search this conversation's long-term memory and its earlier messages that are no longer in "
    "your context (never another person's or chat's). Each hit has its message numbers (seqs), "
    "date, speaker and text. Use it when the person refers to something said before. If the hits "
    "do not answer, search again with other words: names, places, dates, or how they would have put it."
)
REMEMBER_DESCRIPTION = (
    "Keep a durable fact, decision or constraint in long-term memory, one per line (for example "
    "'Constraint: Grace is allergic to nuts'). Use it for what should still be known in later "
    "conversations; it is also found by recall."
)
# A hit's text in a result is at most this long; the seqs lead to the whole message.
HIT_TEXT_CHARS = 400
# What the tool keeps of `chorus recall --json`'s record of a hit: not the store's ids, nor
# `shown` (the words of `text` and `reply` once more).
HIT_FIELDS = ("kind", "seqs", "date", "speaker", "text", "reply", "score")


class RecallArguments(BaseModel):
    query: str = Field(min_length=1, max_length=500, description="What to look for, in a few words.")
    k: int = Field(default=5, ge=1, le=20, description="How many hits to return.")


class RememberArguments(BaseModel):
    text: str = Field(min_length=1, max_length=2000, description="What to keep, one item per line.")


def memory_tools(memory: MemoryService) -> list[Tool]:
    async def recall(context: ToolContext, arguments: RecallArguments) -> object:
        # Full-text search and the query's embedding: blocking work, off the event loop.
        hits = await boundary_for(memory.store.database).run(
            memory.recall.search,
            Owner.of(context.session),
            arguments.query,
            arguments.k,
            window_session_id=context.session.id,
            window_from_seq=context.window_from_seq,
        )
        return {"query": arguments.query, "hits": [tool_hit(hit) for hit in hits]}

    async def remember(context: ToolContext, arguments: RememberArguments) -> object:
        kept = await memory.remember(context.session, arguments.text, context.seq)
        return {
            "stored": [{"kind": kind, "text": text} for kind, text in kept.items],
            "new": kept.counts.written,
            "already_known": kept.counts.merged,
        }

    return [
        FunctionTool("recall", RECALL_DESCRIPTION, RecallArguments, recall, read_only=True),
        FunctionTool("remember", REMEMBER_DESCRIPTION, RememberArguments, remember, read_only=False),
    ]


def tool_hit(hit: RecallHit) -> dict[str, object]:
    record = hit_record(hit, HIT_TEXT_CHARS)
    return {field: record[field] for field in HIT_FIELDS}
