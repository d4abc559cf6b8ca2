"""Chat commands: /memory (list, export), /forget ID, /recall QUERY.

Every command acts on the memory of the chat it is sent in: a private chat sees
the person's memory, a group chat the group's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bot.commands.registry import Command, CommandContext
from bot.memory.recall import format_hit
from bot.memory.snapshot import shorten
from bot.storage.boundary import boundary_for
from bot.storage.memory_models import MemoryItem
from bot.storage.owners import Owner
from bot.turns.events import CommandAnswer

LIST_ITEMS = 20
RECALL_HITS = 5


def item_line(item: MemoryItem) -> str:
    repeated = f" ×{item.mentions}" if item.mentions > 1 else ""
    said = item.said_at or item.created_at
    return f"#{item.id} [{item.kind}] {said:%Y-%m-%d}{repeated} — {shorten(item.content, 200)}"


def item_record(item: MemoryItem) -> dict[str, Any]:
    """One item as exported (by `/memory export`)."""
    return {
        "id": item.id,
        "kind": item.kind,
        "content": item.content,
        "importance": item.importance,
        "mentions": item.mentions,
        "source": item.source,
        "session_id": item.session_id,
        "first_seq": item.source_seq,
        "last_seq": item.source_last_seq,
        "said_at": item.said_at.isoformat() if item.said_at is not None else None,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
    }


def export_items(items: Sequence[MemoryItem]) -> str:
    return json.dumps([item_record(item) for item in items], ensure_ascii=False, indent=2)


async def memory_command(context: CommandContext, args: str) -> CommandAnswer:
    store = context.require_memory().store
    db = boundary_for(store.database)
    owner = Owner.of(context.route.session)
    if args.strip().lower() == "export":
        return CommandAnswer(f"```json\n{export_items(await db.run(store.all_items, owner))}\n```")
    if args.strip():
        return CommandAnswer("Use /memory to list, or /memory export to dump everything.", ok=False)
    items = await db.run(store.recent_items, owner, LIST_ITEMS)
    if not items:
        return CommandAnswer(
            "Nothing remembered yet. Decisions, constraints and conclusions are "
            "stored as the conversation goes on."
        )
    totals = await db.run(store.totals, owner)
    total = await db.run(store.count_items, owner)
    header = (
        f"{total} remembered item{'s' if total != 1 else ''} "
        f"({totals['written']} written, {totals['merged']} merged, "
        f"{totals['deduped']} duplicates skipped). Newest first:"
    )
    footer = "Remove one with /forget ID; dump all with /memory export."
    return CommandAnswer("\n".join([header, *map(item_line, items), footer]))


async def forget_command(context: CommandContext, args: str) -> CommandAnswer:
    store = context.require_memory().store
    raw = args.strip().lstrip("#")
    if not raw.isdigit():
        return CommandAnswer("Give the number shown by /memory, e.g. /forget 12.", ok=False)
    if not await boundary_for(store.database).run(
        store.delete_item, Owner.of(context.route.session), int(raw)
    ):
        return CommandAnswer(f"There is no remembered item #{raw} here (see /memory).", ok=False)
    return CommandAnswer(f"Forgot item #{raw}.")


async def recall_command(context: CommandContext, args: str) -> CommandAnswer:
    memory = context.require_memory()
    if not args.strip():
        return CommandAnswer("Tell me what to look for, e.g. /recall database choice.", ok=False)
    # Full-text search and the query's embedding: blocking work, off the event loop.
    hits = await boundary_for(memory.store.database).run(
        memory.recall.search, Owner.of(context.route.session), args, RECALL_HITS
    )
    if not hits:
        return CommandAnswer(f"Nothing found for “{args.strip()}”.")
    return CommandAnswer(
        "\n".join(f"{n}. {format_hit(hit)} · score {hit.score:.3f}" for n, hit in enumerate(hits, 1))
    )


COMMANDS = (
    Command("memory", "list what I remember here, or /memory export", memory_command, usage="[export]"),
    Command("forget", "remove one remembered item: /forget ID", forget_command, usage="ID"),
    Command("recall", "search memory and earlier messages: /recall QUERY", recall_command, usage="QUERY"),
)
