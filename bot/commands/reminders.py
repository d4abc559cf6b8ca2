"""Chat commands: /remind WHEN TEXT, /reminders [cancel ID], /timezone [ZONE].

They format the reminder service's results for people (the model's tools return the
same as JSON). A reminder set in a group is the group's: it goes to the group, and
/reminders there lists the group's.
"""

from __future__ import annotations

from bot.commands.registry import Command, CommandContext
from bot.reminders.service import ReminderView
from bot.reminders.times import ACCEPTED, parse_command
from bot.storage.owners import Owner
from bot.tools.base import ChatAddress
from bot.turns.events import CommandAnswer


def reminder_line(item: ReminderView) -> str:
    repeats = f" · repeats ({item.recurrence})" if item.recurrence else ""
    why = f" · {item.failure}" if item.failure else ""
    return f"#{item.id} {item.due_local}{repeats} — {item.text}{why}"


async def remind_command(context: CommandContext, args: str) -> CommandAnswer:
    reminders = context.require_reminders()
    if not args.strip():
        return CommandAnswer(f"Tell me when and what: /remind 10m stretch. I accept {ACCEPTED}.", ok=False)
    owner = Owner.of(context.session)
    parsed = parse_command(
        args,
        await reminders.zone(owner),
        reminders.clock(),
        reminders.settings.reminders.min_interval_seconds,
    )
    inbound = context.inbound
    stored = await reminders.schedule(
        context.session,
        context.engine.persona_for(context.session).id,
        ChatAddress(inbound.lane, inbound.chat_id, inbound.chat_kind, inbound.thread_id),
        parsed.text,
        parsed.when,
        created_by=context.route.sender_id,
    )
    repeats = f", then again on {stored.recurrence}" if stored.recurrence else ""
    return CommandAnswer(
        f"⏰ I will remind you “{stored.text}” at {stored.due_local}{repeats} (#{stored.id}; "
        f"/reminders cancel {stored.id} to cancel)."
    )


async def reminders_command(context: CommandContext, args: str) -> CommandAnswer:
    reminders = context.require_reminders()
    owner = Owner.of(context.session)
    words = args.split()
    if words and words[0].lower() == "cancel":
        raw = words[1].lstrip("#") if len(words) > 1 else ""
        if not raw.isdigit():
            return CommandAnswer("Give the number /reminders shows, e.g. /reminders cancel 3.", ok=False)
        if not await reminders.cancel(owner, int(raw)):
            return CommandAnswer(f"There is no waiting reminder #{raw} here (see /reminders).", ok=False)
        return CommandAnswer(f"Cancelled reminder #{raw}.")
    if words:
        return CommandAnswer("Use /reminders to list, or /reminders cancel ID.", ok=False)
    listing = await reminders.listing(owner)
    if not listing.waiting and not listing.undelivered:
        return CommandAnswer("No reminders here. Set one with /remind 10m stretch.")
    lines = [f"Waiting ({len(listing.waiting)}):", *map(reminder_line, listing.waiting)]
    if listing.undelivered:
        lines += [
            "Missed or failed:",
            *(f"{reminder_line(item)} [{item.state}]" for item in listing.undelivered),
        ]
    lines.append("Cancel one with /reminders cancel ID.")
    return CommandAnswer("\n".join(lines))


async def timezone_command(context: CommandContext, args: str) -> CommandAnswer:
    reminders = context.require_reminders()
    owner = Owner.of(context.session)
    if not args.strip():
        zone = await reminders.zone(owner)
        return CommandAnswer(f"Times here are read in {zone.key}. Change it with /timezone Europe/Berlin.")
    zone = await reminders.set_zone(owner, args)
    return CommandAnswer(f"Times here are now read in {zone.key}.")


COMMANDS = (
    Command("remind", "set a reminder: /remind 10m stretch", remind_command, usage="WHEN TEXT"),
    Command("reminders", "list reminders, or /reminders cancel ID", reminders_command, usage="[cancel ID]"),
    Command("timezone", "show or set the time zone reminders use", timezone_command, usage="[ZONE]"),
)
