"""Voice commands: /voice on|off, spoken replies for this conversation."""

from __future__ import annotations

from bot.commands.registry import Command, CommandContext
from bot.speech.speaking import NO_SERVICE
from bot.turns.events import CommandAnswer

VOICE_USAGE = "Usage: /voice on (replies also come as voice messages) or /voice off (text only)."


async def voice_command(context: CommandContext, args: str) -> CommandAnswer:
    engine = context.engine
    session_id = context.session.id
    choice = args.strip().lower()
    if not choice:
        spoken = await engine.db.run(engine.stores.sessions.is_spoken, session_id)
        state = "on: replies also come as voice messages" if spoken else "off: replies are text only"
        return CommandAnswer(f"Spoken replies are {state}. {VOICE_USAGE}")
    if choice not in ("on", "off"):
        return CommandAnswer(VOICE_USAGE, ok=False)
    if choice == "on" and not engine.speaking.available:
        return CommandAnswer(NO_SERVICE, ok=False)
    await engine.db.run(engine.stores.sessions.set_spoken, session_id, choice == "on")
    if choice == "on":
        return CommandAnswer(
            "Spoken replies are on: each reply also comes as a voice message. /voice off stops them."
        )
    return CommandAnswer("Spoken replies are off: replies are text only.")


COMMANDS = (Command("voice", "spoken replies: /voice on or /voice off", voice_command, usage="on | off"),)
