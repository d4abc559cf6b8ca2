"""Context commands: /context, /compact, /snip and /unsnip.

They change what the model sees, never what is stored: the transcript and its
export keep every message.
"""

from __future__ import annotations

import re

from bot.commands.registry import Command, CommandContext
from bot.context.inspection import context_overview
from bot.context.maintenance import ContextMaintainer
from bot.context.snipping import snip, unsnip
from bot.storage.models import ChatSession
from bot.turns.events import CommandAnswer
from transcript import render_context_report

# "12-18", "12..18", "#12–#18" or a single "#12".
_RANGE = re.compile(r"^#?(\d+)\s*(?:(?:-|–|\.\.)\s*#?(\d+))?$")
SNIP_USAGE = (
    "Usage: /snip N (the last N messages) or /snip A-B (messages #A to #B, "
    "numbers as shown by /context and in the export)."
)


async def context_command(context: CommandContext, _args: str) -> CommandAnswer:
    overview = await context_overview(context.require_maintainer(), context.session)
    return CommandAnswer(render_context_report(overview))


async def compact_command(context: CommandContext, args: str) -> CommandAnswer:
    maintainer = context.require_maintainer()
    session = context.session
    result = await maintainer.compact_now(session, args or None)
    keep = maintainer.settings.keep_recent_messages
    if result is None:
        return CommandAnswer(
            f"Nothing to compact: the last {keep} messages always stay word for word, "
            "and everything before them is already in the summary."
        )
    plan = result.plan
    return CommandAnswer(
        f"Compacted messages #{plan.first_seq}–#{plan.last_seq} ({len(plan.rows)} messages, "
        f"{result.folded_tokens:,} tokens) into the summary ({result.record.token_count:,} tokens). "
        f"The last {keep} messages stay word for word; the stored transcript is unchanged."
    )


async def snip_command(context: CommandContext, args: str) -> CommandAnswer:
    maintainer = context.require_maintainer()
    session = context.session
    span = await maintainer.db.run(_snip_span, maintainer, session, args.strip())
    if span is None:
        return CommandAnswer(SNIP_USAGE, ok=False)
    snipped = await snip(maintainer, session, *span)
    note = ""
    if snipped.summarised_up_to is not None:
        note = f" Messages up to #{snipped.summarised_up_to} were summarised already; the summary keeps them."
    return CommandAnswer(
        f"Snipped {_span_text(snipped.first_seq, snipped.last_seq)} from the model's context. They stay in "
        f"the stored transcript and the export; /unsnip brings them back.{note}"
    )


async def unsnip_command(context: CommandContext, args: str) -> CommandAnswer:
    undone = await unsnip(context.require_maintainer(), context.session, every=args.strip().lower() == "all")
    if not undone:
        return CommandAnswer("No snipped messages to bring back.", ok=False)
    spans = ", ".join(_span_text(snip.first_seq, snip.last_seq) for snip in undone)
    return CommandAnswer(f"Brought back {spans} into the model's context.")


COMMANDS = (
    Command("context", "show what the model sees now and its token use", context_command),
    Command(
        "compact",
        "summarise older messages now: /compact [what to focus on]",
        compact_command,
        usage="[focus]",
    ),
    Command(
        "snip",
        "leave messages out of the model's context: /snip N or /snip A-B",
        snip_command,
        usage="N | A-B",
    ),
    Command("unsnip", "undo the last /snip (or /unsnip all)", unsnip_command, usage="[all]"),
)


def _snip_span(maintainer: ContextMaintainer, session: ChatSession, args: str) -> tuple[int, int] | None:
    """(first seq, last seq) of what `args` names, or None when it names nothing stored."""
    match = _RANGE.match(args)
    if match is None:
        return None
    if match.group(2) is None and not args.startswith("#"):
        count = int(match.group(1))
        rows = maintainer.messages.recent_rows(session.id, count) if count > 0 else []
        return (rows[0].seq, rows[-1].seq) if rows else None
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if first < 1 or last < first or last > session.last_seq:
        return None
    return first, last


def _span_text(first: int, last: int) -> str:
    return f"message #{first}" if first == last else f"messages #{first}–#{last}"
