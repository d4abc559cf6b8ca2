"""Session commands: /new starts a fresh conversation and keeps the old one saved."""

from __future__ import annotations

from bot.commands.registry import Command, CommandContext
from bot.turns.events import CommandAnswer


async def new_command(context: CommandContext, _args: str) -> CommandAnswer:
    engine = context.engine
    inbound = context.inbound
    old = context.session
    fresh = await engine.db.run(
        engine.stores.sessions.start_new_session, old, inbound.lane, inbound.chat_id, inbound.thread_id
    )
    return CommandAnswer(
        f"Started a new conversation. The previous one is saved as {old.id[:8]} "
        f"(export it with `chorus export {old.id[:8]}`).",
        session_id=fresh.id,
    )


COMMANDS = (Command("new", "start a fresh conversation (the old one stays saved)", new_command),)
