"""Chat commands: /memory (list, history, export), /forget ID | me, /recall QUERY.

Every command acts on the memory of the chat it is sent in: a private chat sees
the person's memory, a group chat the group's, each item attributed to whom it is
about and who said it. In a group a person forgets only their own items: the ones
they said or that are about them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bot.commands.registry import Command, CommandContext
from bot.memory.recall import format_hit
from bot.memory.snapshot import attributed, shorten
from bot.storage.boundary import boundary_for
from bot.storage.memory_models import MemoryItem
from bot.storage.owners import Owner
from bot.turns.events import CommandAnswer

LIST_ITEMS = 20
RECALL_HITS = 5


def item_line(item: MemoryItem) -> str:
    repeated = f" ×{item.mentions}" if item.mentions > 1 else ""
    said = item.said_at or item.created_at
    text = shorten(attributed(item.content, item.about, item.said_by_name), 200)
    until = (
        f" until {item.valid_until:%Y-%m-%d} (replaced by #{item.superseded_by})"
        if item.superseded_by is not None and item.valid_until is not None
        else ""
    )
    return f"#{item.id} [{item.kind}] {said:%Y-%m-%d}{until}{repeated} — {text}"


def owns(item: MemoryItem, context: CommandContext) -> bool:
    """Whether the person who sent the command may forget `item`: theirs in a private chat;
    in a group, an item they said or one about them."""
    if context.route.session.owner_kind != "group":
        return True
    account = context.route.account
    name = account.display_name.strip().lower()
    return item.said_by == account.person_id or bool(name and (item.about or "").strip().lower() == name)


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
        "about": item.about,
        "said_by": item.said_by,
        "said_by_name": item.said_by_name,
        "holds": item.superseded_by is None,
        "replaced_by": item.superseded_by,
        "valid_until": item.valid_until.isoformat() if item.valid_until is not None else None,
    }


def export_items(items: Sequence[MemoryItem]) -> str:
    return json.dumps([item_record(item) for item in items], ensure_ascii=False, indent=2)


async def memory_command(context: CommandContext, args: str) -> CommandAnswer:
    store = context.require_memory().store
    db = boundary_for(store.database)
    owner = Owner.of(context.route.session)
    if args.strip().lower() == "export":
        return CommandAnswer(f"```json\n{export_items(await db.run(store.all_items, owner))}\n```")
    if args.strip().lower() == "history":
        replaced = await db.run(store.history_items, owner, LIST_ITEMS)
        if not replaced:
            return CommandAnswer("Nothing remembered here has been replaced by a newer fact.")
        return CommandAnswer(
            "\n".join(["What held before, most recently replaced first:", *map(item_line, replaced)])
        )
    if args.strip():
        return CommandAnswer(
            "Use /memory to list what holds now, /memory history for what held before, "
            "or /memory export to dump everything.",
            ok=False,
        )
    items = await db.run(store.recent_items, owner, LIST_ITEMS)
    if not items:
        return CommandAnswer(
            "Nothing remembered yet. Decisions, constraints and conclusions are "
            "stored as the conversation goes on."
        )
    totals = await db.run(store.totals, owner)
    total = await db.run(store.count_items, owner, current=True)
    held_before = await db.run(store.count_items, owner, current=False)
    history = f", {held_before} replaced by newer ones (/memory history)" if held_before else ""
    header = (
        f"{total} remembered item{'s' if total != 1 else ''} "
        f"({totals['written']} written, {totals['merged']} merged, "
        f"{totals['deduped']} duplicates skipped{history}). Newest first:"
    )
    forget = "/forget ID, or all of yours with /forget me" if owner.kind == "group" else "/forget ID"
    footer = f"Remove one with {forget}; dump all with /memory export."
    return CommandAnswer("\n".join([header, *map(item_line, items), footer]))


async def forget_command(context: CommandContext, args: str) -> CommandAnswer:
    store = context.require_memory().store
    db = boundary_for(store.database)
    owner = Owner.of(context.route.session)
    raw = args.strip().lstrip("#")
    if raw.lower() in ("me", "mine"):
        account = context.route.account
        if owner.kind == "group":
            items = await db.run(store.person_items, owner, account.person_id, account.display_name)
        else:
            items = await db.run(store.all_items, owner)
        for mine in items:
            if mine.id is not None:
                await db.run(store.delete_item, owner, mine.id)
        if owner.kind != "group":
            # What was said before (the replies that quoted it too) is not distilled again later;
            # in a group the others' pending messages still are.
            await db.run(context.require_memory().offloader.skip_pending, context.route.session)
        return CommandAnswer(f"Forgot {len(items)} item{'s' if len(items) != 1 else ''} of yours here.")
    if not raw.isdigit():
        return CommandAnswer("Give the number shown by /memory, e.g. /forget 12, or /forget me.", ok=False)
    item = await db.run(store.get_item, owner, int(raw))
    if item is None:
        return CommandAnswer(f"There is no remembered item #{raw} here (see /memory).", ok=False)
    if not owns(item, context):
        who = item.said_by_name or item.about or "someone else"
        return CommandAnswer(
            f"Item #{raw} is {who}'s: in a group you can forget what you said or what is about you.",
            ok=False,
        )
    await db.run(store.delete_item, owner, int(raw))
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
    Command(
        "memory",
        "list what I remember here that holds now; /memory history, /memory export",
        memory_command,
        usage="[history|export]",
    ),
    Command(
        "forget",
        "remove a remembered item: /forget ID, or all of yours: /forget me",
        forget_command,
        usage="ID|me",
    ),
    Command("recall", "search memory and earlier messages: /recall QUERY", recall_command, usage="QUERY"),
)
