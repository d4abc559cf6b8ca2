"""Reasoning commands: /reasoning on|off, the model's thinking shown beside its replies."""

from __future__ import annotations

from bot.commands.registry import Command, CommandContext
from bot.turns.events import CommandAnswer

REASONING_USAGE = "Usage: /reasoning on (show the model's thinking, folded) or /reasoning off (hide it)."


async def reasoning_command(context: CommandContext, args: str) -> CommandAnswer:
    engine = context.engine
    session_id = context.session.id
    choice = args.strip().lower()
    if not choice:
        shown = await engine.db.run(engine.stores.sessions.shows_reasoning, session_id)
        state = "shown beside each reply" if shown else "hidden"
        return CommandAnswer(f"The model's thinking is {state}. {REASONING_USAGE}")
    if choice not in ("on", "off"):
        return CommandAnswer(REASONING_USAGE, ok=False)
    await engine.db.run(engine.stores.sessions.set_shows_reasoning, session_id, choice == "on")
    if choice == "on":
        return CommandAnswer(
            "Reasoning is on: when the model thinks before answering, its thinking comes folded "
            "beside the reply. /reasoning off hides it."
        )
    return CommandAnswer("Reasoning is off: only the replies are shown.")


COMMANDS = (
    Command(
        "reasoning", "show the model's thinking: /reasoning on or off", reasoning_command, usage="on | off"
    ),
)
