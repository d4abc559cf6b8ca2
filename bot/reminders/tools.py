"""The model's reminder tools: `schedule`, `list_schedules` and `cancel_schedule`.

They share the reminder service with `/remind` and `/reminders`: the commands format
reminders for people, these return them as JSON. A reminder goes to the chat the turn
came from, and in a group it is the group's.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from bot.reminders.service import ReminderService
from bot.reminders.times import parse_arguments
from bot.storage.owners import Owner
from bot.tools.base import FunctionTool, Tool, ToolContext

SCHEDULE_DESCRIPTION = (
    "Set a reminder: at the time given, you send `text` to this chat, once (or on every firing of "
    "`cron`). Give exactly one of in_seconds (from now), at (ISO 8601; without an offset it is read "
    "in the person's time zone) or cron (5 fields, in the person's time zone, at most once a minute). "
    "The result has the reminder's id and its due time in UTC (due_at) and as the person reads it "
    "(due_local)."
)
LIST_DESCRIPTION = (
    "The reminders of this chat's owner that still wait (soonest first), and those that were missed "
    "or failed, each with its id, text, due time and recurrence."
)
CANCEL_DESCRIPTION = "Cancel a waiting reminder by the id schedule or list_schedules gave."


class ScheduleArguments(BaseModel):
    text: str = Field(min_length=1, description="What to say when it falls due.")
    in_seconds: float | None = Field(default=None, gt=0, description="Seconds from now.")
    at: str | None = Field(default=None, description="An ISO 8601 time, e.g. 2026-12-24T09:00.")
    cron: str | None = Field(default=None, description="A cron expression, e.g. '0 8 * * 1-5'.")


class ListArguments(BaseModel):
    pass


class CancelArguments(BaseModel):
    id: int = Field(ge=1, description="The reminder's id.")


def reminder_tools(reminders: ReminderService) -> list[Tool]:
    async def schedule(context: ToolContext, arguments: ScheduleArguments) -> object:
        owner = Owner.of(context.session)
        settings = reminders.settings.reminders
        when = parse_arguments(
            await reminders.zone(owner),
            reminders.clock(),
            settings.min_interval_seconds,
            in_seconds=arguments.in_seconds,
            at=arguments.at,
            cron=arguments.cron,
        )
        stored = await reminders.schedule(
            context.session, context.persona_id, context.chat, arguments.text, when
        )
        return stored.as_json()

    async def list_schedules(context: ToolContext, _arguments: ListArguments) -> object:
        listing = await reminders.listing(Owner.of(context.session))
        return {
            "waiting": [item.as_json() for item in listing.waiting],
            "missed_or_failed": [item.as_json() for item in listing.undelivered],
        }

    async def cancel_schedule(context: ToolContext, arguments: CancelArguments) -> object:
        cancelled = await reminders.cancel(Owner.of(context.session), arguments.id)
        return {"id": arguments.id, "cancelled": cancelled}

    return [
        FunctionTool("schedule", SCHEDULE_DESCRIPTION, ScheduleArguments, schedule, read_only=False),
        FunctionTool("list_schedules", LIST_DESCRIPTION, ListArguments, list_schedules, read_only=True),
        FunctionTool(
            "cancel_schedule", CANCEL_DESCRIPTION, CancelArguments, cancel_schedule, read_only=False
        ),
    ]
