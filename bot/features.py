"""Features as bundles: each one's chat commands, tools and jobs kept together.

`build_runtime` adds every feature in one loop, the way discord.py adds a cog: the commands to
the registry, the tools to the built-in tool source, the jobs to the job definitions. A new
feature is one entry in `features()`; nothing else in the runtime names its parts. The order
is the order `/help` lists the commands and the after-turn jobs are enqueued in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.commands import access as access_commands
from bot.commands import context as context_commands
from bot.commands import general, identity, personas, sessions
from bot.commands import memory as memory_commands
from bot.commands import models as model_commands
from bot.commands import reasoning as reasoning_commands
from bot.commands import reminders as reminder_commands
from bot.commands import voice as voice_commands
from bot.commands.registry import Command
from bot.context.maintenance import ContextMaintainer
from bot.context.tools import context_tools
from bot.jobs.definitions import Job, context_jobs, memory_jobs
from bot.memory import MemoryService
from bot.memory.tools import memory_tools
from bot.reminders.service import ReminderService
from bot.reminders.tools import reminder_tools
from bot.storage.messages import MessageStore
from bot.storage.reminders import FIRE_REMINDER
from bot.storage.sessions import SessionStore
from bot.tools.base import Tool


@dataclass(frozen=True)
class Feature:
    """What one feature adds to the runtime."""

    name: str
    commands: Sequence[Command] = ()
    tools: Sequence[Tool] = ()
    jobs: Sequence[Job] = ()


def features(
    sessions_store: SessionStore,
    messages: MessageStore,
    maintainer: ContextMaintainer,
    memory: MemoryService,
    reminders: ReminderService,
) -> tuple[Feature, ...]:
    """Every feature Chorus runs; memory's tools and jobs only while memory is on."""
    remembering = memory.settings.enabled
    return (
        Feature("general", general.COMMANDS),
        Feature("personas", personas.COMMANDS),
        Feature("identity", identity.COMMANDS),
        Feature("sessions", sessions.COMMANDS),
        Feature(
            "context",
            context_commands.COMMANDS,
            context_tools(maintainer),
            context_jobs(sessions_store, maintainer),
        ),
        Feature(
            "memory",
            memory_commands.COMMANDS,
            memory_tools(memory) if remembering else (),
            memory_jobs(sessions_store, messages, maintainer, memory, memory.settings),
        ),
        Feature("models", model_commands.COMMANDS),
        Feature("voice", voice_commands.COMMANDS),
        Feature("reasoning", reasoning_commands.COMMANDS),
        Feature(
            "reminders",
            reminder_commands.COMMANDS,
            reminder_tools(reminders),
            # A reminder's job: its key names the reminder, its seq the occurrence.
            (Job(FIRE_REMINDER, reminders.fire),),
        ),
        Feature("access", access_commands.COMMANDS),
    )
