"""Chat commands: parsed and run once here, for every lane.

Each command family is a module of this package with module-level handlers
`async def name(context: CommandContext, args: str) -> CommandAnswer` and one
`COMMANDS` table; `bot.runtime` adds the tables to one `CommandRegistry`, which
the turn engine asks to recognise a command in a message (`recognise`) and runs
it through. Lanes register the names with their platform (Telegram's
setMyCommands, Discord's slash commands) from `CommandRegistry.describe()`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.errors import ChorusError, CommandUnavailable
from bot.turns.events import CommandAnswer
from bot.turns.inbound import InboundMessage
from bot.turns.routing import Route

if TYPE_CHECKING:
    from bot.config import Settings
    from bot.context.maintenance import ContextMaintainer
    from bot.conversation_model import ConversationModel
    from bot.memory.service import MemoryService
    from bot.providers.base import ChatProvider
    from bot.reminders.service import ReminderService
    from bot.speech.speaking import Speaking
    from bot.storage.boundary import DatabaseBoundary
    from bot.storage.models import ChatSession
    from bot.storage.stores import Stores
    from bot.turns.access import Access
    from persona import Persona, PersonaRegistry
    from transcript import Context

log = logging.getLogger(__name__)

# "/name", "/name@BotName", then arguments after whitespace. "/etc/hosts" is not a command.
COMMAND_PATTERN = re.compile(r"^/([A-Za-z][A-Za-z0-9_]{0,31})(?:@[A-Za-z0-9_]+)?(?:\s+(.*))?$", re.S)


@dataclass(frozen=True)
class ParsedCommand:
    name: str
    args: str


class CommandEngine(Protocol):
    """What a command may ask of the turn engine (`bot.turns.engine.TurnEngine` is one)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def stores(self) -> Stores: ...

    @property
    def db(self) -> DatabaseBoundary:
        """Where a command runs its store calls: off the event loop."""
        ...

    @property
    def personas(self) -> PersonaRegistry: ...

    @property
    def access(self) -> Access:
        """Who is asking: /pair answers admins only."""
        ...

    @property
    def provider(self) -> ChatProvider: ...

    @property
    def speaking(self) -> Speaking:
        """How replies are spoken (`/voice`); `available` says whether a speech service is set."""
        ...

    def persona_for(self, session: ChatSession) -> Persona: ...

    def conversation_model(self, session: ChatSession, persona: Persona) -> ConversationModel: ...

    def model_for(self, session: ChatSession, persona: Persona) -> str: ...

    def model_shown(self, session: ChatSession, persona: Persona) -> str: ...

    async def inspect(self, session: ChatSession) -> Context: ...

    def stop_turn(self, session_id: str) -> bool: ...

    async def cancel_approvals(self, session_id: str) -> int: ...


@dataclass(frozen=True)
class CommandContext:
    """What a command runs with: the engine's narrow surface, the message, its route,
    the session as stored when the command runs (fresher than `route.session`), and the
    registry's own services."""

    engine: CommandEngine
    inbound: InboundMessage
    route: Route
    session: ChatSession
    commands: CommandRegistry
    maintainer: ContextMaintainer | None = None
    memory: MemoryService | None = None
    reminders: ReminderService | None = None

    def require_maintainer(self) -> ContextMaintainer:
        if self.maintainer is None:
            raise CommandUnavailable("Context maintenance is not running in this process.")
        return self.maintainer

    def require_memory(self) -> MemoryService:
        if self.memory is None:
            raise CommandUnavailable("Long-term memory is not running in this process.")
        return self.memory

    def require_reminders(self) -> ReminderService:
        if self.reminders is None:
            raise CommandUnavailable("Reminders are not running in this process.")
        return self.reminders


CommandHandler = Callable[[CommandContext, str], Awaitable[CommandAnswer]]


@dataclass(frozen=True)
class Command:
    name: str
    description: str
    handler: CommandHandler
    usage: str = ""
    # False for commands about the running turn itself (/stop): they run while it holds the lock.
    waits_for_turn: bool = True


def parse_command(text: str) -> ParsedCommand | None:
    match = COMMAND_PATTERN.match(text.strip())
    if match is None:
        return None
    return ParsedCommand(name=match.group(1).lower(), args=(match.group(2) or "").strip())


@dataclass(frozen=True)
class RecognisedCommand:
    """A command in a message, ready to run (what the engine gets from `recognise`)."""

    parsed: ParsedCommand
    registry: CommandRegistry

    @property
    def waits_for_turn(self) -> bool:
        return self.registry.waits_for_turn(self.parsed.name)

    async def run(
        self, engine: CommandEngine, inbound: InboundMessage, route: Route, session: ChatSession
    ) -> CommandAnswer:
        registry = self.registry
        context = CommandContext(
            engine=engine,
            inbound=inbound,
            route=route,
            session=session,
            commands=registry,
            maintainer=registry.maintainer,
            memory=registry.memory,
            reminders=registry.reminders,
        )
        return await registry.run(self.parsed, context)


class CommandRegistry:
    """The commands of the process, and the services the context, memory and reminder commands act on."""

    def __init__(
        self,
        *,
        maintainer: ContextMaintainer | None = None,
        memory: MemoryService | None = None,
        reminders: ReminderService | None = None,
    ) -> None:
        self._commands: dict[str, Command] = {}
        self.maintainer = maintainer
        self.memory = memory
        self.reminders = reminders

    def add(self, command: Command) -> None:
        if command.name in self._commands:
            raise ValueError(f"command /{command.name} registered twice")
        self._commands[command.name] = command

    def add_all(self, commands: Iterable[Command]) -> None:
        for command in commands:
            self.add(command)

    def __contains__(self, name: str) -> bool:
        return name in self._commands

    def recognise(self, text: str) -> RecognisedCommand | None:
        """The command `text` is, or None when it is an ordinary message."""
        parsed = parse_command(text)
        return RecognisedCommand(parsed, self) if parsed is not None else None

    def waits_for_turn(self, name: str) -> bool:
        command = self._commands.get(name)
        return command is None or command.waits_for_turn

    def describe(self) -> list[tuple[str, str]]:
        """(name, description) pairs in registration order."""
        return [(command.name, command.description) for command in self._commands.values()]

    def help_text(self) -> str:
        lines = ["Commands:"]
        for command in self._commands.values():
            usage = f" {command.usage}" if command.usage else ""
            lines.append(f"/{command.name}{usage} — {command.description}")
        return "\n".join(lines)

    async def run(self, parsed: ParsedCommand, context: CommandContext) -> CommandAnswer:
        command = self._commands.get(parsed.name)
        if command is None:
            return CommandAnswer(
                f"Unknown command /{parsed.name}. Send /help to see what I understand.", ok=False
            )
        try:
            return await command.handler(context, parsed.args)
        except ChorusError as error:
            return CommandAnswer(str(error), ok=False)
