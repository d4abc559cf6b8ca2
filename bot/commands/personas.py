"""Persona commands: /persona lists the voices or switches the session's voice."""

from __future__ import annotations

from bot.commands.registry import Command, CommandContext
from bot.errors import UnknownPersona
from bot.storage.message_append import NewMessage
from bot.storage.stores import Stores
from bot.turns.events import CommandAnswer


async def persona_command(context: CommandContext, args: str) -> CommandAnswer:
    engine = context.engine
    session = context.session
    current = engine.persona_for(session)
    if not args:
        lines = ["Personas:"]
        for persona in engine.personas:
            marker = "▶" if persona.id == current.id else " "
            lines.append(f"{marker} {persona.id} — {persona.name}")
        lines.append("Switch with /persona <id>.")
        return CommandAnswer("\n".join(lines))
    chosen = engine.personas.get(args.split()[0])
    if chosen is None:
        raise UnknownPersona(args.split()[0], engine.personas.ids())
    if chosen.id == current.id:
        return CommandAnswer(f"{chosen.name} is already speaking.")
    await engine.db.run(
        switch_persona,
        engine.stores,
        session.id,
        current.id,
        chosen.id,
        sender_id=context.route.sender_id,
        sender_name=context.inbound.actor.display_name,
        lane=context.inbound.lane,
    )
    greeting = chosen.greeting or f"{chosen.name} here."
    return CommandAnswer(f"Switched to {chosen.name} ({chosen.id}). {greeting}")


def switch_persona(
    stores: Stores,
    session_id: str,
    current_id: str,
    chosen_id: str,
    *,
    sender_id: str | None,
    sender_name: str | None,
    lane: str | None,
) -> None:
    """Make `chosen_id` the session's voice; `/persona` and the operator's console both switch here."""
    stores.sessions.set_persona(session_id, chosen_id)
    # The switch is itself part of the stored transcript (exported, never sent to the model).
    stores.messages.append(
        session_id,
        NewMessage(
            role="system",
            kind="persona_switch",
            content=f"persona switched from {current_id} to {chosen_id}",
            token_count=0,
            persona_id=chosen_id,
            sender_id=sender_id,
            sender_name=sender_name,
            lane=lane,
        ),
    )


COMMANDS = (Command("persona", "list personas or switch: /persona <id>", persona_command, usage="[id]"),)
