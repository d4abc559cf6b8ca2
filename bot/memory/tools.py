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
    "Search this conversation's long-term memory and all its earlier messages (never another "
    "person's or chat's), as /recall does. Each hit has its message numbers (seqs), date, speaker "
    "and text; `in_context: true` marks a message still in your context, so the answer is already in "
    "the conversation above. Use it when the person refers to something said before. If the hits "
    "do not answer, search again with other words: names, places, dates, or how they would have put it."
)
# Said beside the hits when some are still in the model's context.
IN_CONTEXT_NOTE = "Hits marked in_context are still in this conversation: the answer is already above."
REMEMBER_DESCRIPTION = (
    "Keep a durable fact, decision or constraint in long-term memory, one per line (for example "
    "'Constraint: Grace is allergic to nuts'). Use it for what should still be known in later "
    "conversations; it is also found by recall."
)
# A hit's text in a result is at most this long; the seqs lead to the whole message.
HIT_TEXT_CHARS = 400
# What the tool keeps of `chorus recall --json`'s record of a hit: not the store's ids, nor
# `shown` (the words of `text` and `reply` once more).
HIT_FIELDS = ("kind", "seqs", "date", "speaker", "text", "reply", "score", "about", "holds", "until")


class RecallArguments(BaseModel):
    query: str = Field(min_length=1, max_length=500, description="What to look for, in a few words.")
    k: int = Field(default=5, ge=1, le=20, description="How many hits to return.")


class RememberArguments(BaseModel):
    text: str = Field(min_length=1, max_length=2000, description="What to keep, one item per line.")


def memory_tools(memory: MemoryService) -> list[Tool]:
    async def recall(context: ToolContext, arguments: RecallArguments) -> object:
        # The same search as /recall, the current window included: a person asking "what did I
        # say about X" right after saying it must hear that it was found, not "nothing".
        # Only the question being answered is left out (it matches its own words best).
        # Full-text search and the query's embedding: blocking work, off the event loop.
        db = boundary_for(memory.store.database)
        hits = await db.run(search_before_question, memory, context, arguments)
        records = [tool_hit(hit, in_context(hit, context)) for hit in hits]
        answer: dict[str, object] = {"query": arguments.query, "hits": records}
        if any(record["in_context"] for record in records):
            answer["note"] = IN_CONTEXT_NOTE
        return answer

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


def search_before_question(
    memory: MemoryService, context: ToolContext, arguments: RecallArguments
) -> list[RecallHit]:
    session = context.session
    return memory.recall.search(
        Owner.of(session),
        arguments.query,
        arguments.k,
        window_session_id=session.id,
        window_from_seq=memory.store.newest_user_seq(session.id),
    )


def in_context(hit: RecallHit, context: ToolContext) -> bool:
    """Whether the hit is a message of the model's current window (this session, from its first seq)."""
    return (
        hit.source == "message"
        and hit.session_id == context.session.id
        and hit.seq is not None
        and context.window_from_seq is not None
        and hit.seq >= context.window_from_seq
    )


def tool_hit(hit: RecallHit, shown_in_context: bool = False) -> dict[str, object]:
    record = hit_record(hit, HIT_TEXT_CHARS)
    return {field: record[field] for field in HIT_FIELDS} | {"in_context": shown_in_context}
