"""An on/off setting of one conversation (`/voice`, `/reasoning`): its command, answered alike.

`/name` says the setting's state and usage, `/name on|off` stores it; anything else is the
usage, refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.commands.registry import CommandContext, CommandEngine
from bot.storage.sessions import SessionStore
from bot.turns.events import CommandAnswer


@dataclass(frozen=True)
class SessionSwitch:
    read: Callable[[SessionStore, str], bool]
    write: Callable[[SessionStore, str, bool], None]
    usage: str
    # The sentence `/name` alone answers with, for the setting on or off (the usage follows).
    state: Callable[[bool], str]
    turned_on: str
    turned_off: str
    # Why the setting cannot be turned on here (a missing service), else None.
    unavailable: Callable[[CommandEngine], str | None] = lambda engine: None

    async def __call__(self, context: CommandContext, args: str) -> CommandAnswer:
        engine = context.engine
        sessions = engine.stores.sessions
        session_id = context.session.id
        choice = args.strip().lower()
        if not choice:
            on = await engine.db.run(self.read, sessions, session_id)
            return CommandAnswer(f"{self.state(on)} {self.usage}")
        if choice not in ("on", "off"):
            return CommandAnswer(self.usage, ok=False)
        refusal = self.unavailable(engine) if choice == "on" else None
        if refusal is not None:
            return CommandAnswer(refusal, ok=False)
        await engine.db.run(self.write, sessions, session_id, choice == "on")
        return CommandAnswer(self.turned_on if choice == "on" else self.turned_off)
