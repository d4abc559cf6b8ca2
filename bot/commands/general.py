"""The commands every Chorus deployment has: help, personas, status, identity, sessions."""

from __future__ import annotations

from datetime import timedelta

from bot.commands import Command, CommandAnswer, CommandContext, CommandRegistry
from bot.errors import UnknownPersona
from bot.storage.store import NewMessage


async def help_command(context: CommandContext, _args: str) -> CommandAnswer:
    return CommandAnswer(context.engine.commands.help_text())


async def start_command(context: CommandContext, _args: str) -> CommandAnswer:
    persona = context.engine.persona_for(context.route.session)
    greeting = persona.greeting or f"Hi, I'm {persona.name}."
    return CommandAnswer(f"{greeting}\n\nSend /help to see the commands, /persona to change voice.")


async def persona_command(context: CommandContext, args: str) -> CommandAnswer:
    engine = context.engine
    session = engine.store.get_session(context.route.session.id) or context.route.session
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
    engine.store.set_persona(session.id, chosen.id)
    # The switch is itself part of the stored transcript (exported, never sent to the model).
    engine.store.append(
        session.id,
        NewMessage(
            role="system",
            content=f"persona switched from {current.id} to {chosen.id}",
            token_count=0,
            persona_id=chosen.id,
            sender_id=context.route.sender_id,
            sender_name=context.inbound.actor.display_name,
            lane=context.inbound.lane,
        ),
    )
    greeting = chosen.greeting or f"{chosen.name} here."
    return CommandAnswer(f"Switched to {chosen.name} ({chosen.id}). {greeting}")


async def status_command(context: CommandContext, _args: str) -> CommandAnswer:
    engine = context.engine
    session = engine.store.get_session(context.route.session.id) or context.route.session
    persona = engine.persona_for(session)
    built = await engine.inspect(session)
    stats = built.stats
    model = engine.model_for(persona)
    model_line = f"{model} via {engine.provider.name}"
    if engine.provider.name == "demo":
        model_line = "demo (offline demo model — set CHORUS_MODEL_BASE_URL for a real one)"
    share = stats.total_tokens / stats.budget_tokens if stats.budget_tokens else 0.0
    lines = [
        f"Persona: {persona.name} ({persona.id})",
        f"Model: {model_line}",
        f"Session: {session.id[:8]} ({session.kind}), {session.last_seq} stored messages",
        f"Context: {stats.total_tokens:,} of {stats.budget_tokens:,} tokens ({share:.0%}), "
        f"{stats.messages_kept} messages in the window, {stats.messages_dropped} left out",
    ]
    return CommandAnswer("\n".join(lines))


async def link_command(context: CommandContext, args: str) -> CommandAnswer:
    engine = context.engine
    if context.inbound.chat_kind != "private":
        return CommandAnswer("Use /link in a private chat with me, not in a group.", ok=False)
    account = context.route.account
    if not args:
        ttl = engine.settings.limits.link_code_ttl_seconds
        code = engine.store.create_link_code(account.person_id, timedelta(seconds=ttl))
        return CommandAnswer(
            f"Your link code: {code.code}\nSend /link {code.code} to me on another app within "
            f"{max(ttl // 60, 1)} minutes to continue this conversation there. It works once."
        )
    person = engine.store.redeem_link_code(args, account)
    session = engine.store.private_session(person.id, engine.personas.default.id)
    lanes = sorted({linked.lane for linked in engine.store.accounts_of(person.id)})
    return CommandAnswer(
        f"Linked. Your private chats on {', '.join(lanes)} now share one conversation.",
        session_id=session.id,
    )


async def unlink_command(context: CommandContext, _args: str) -> CommandAnswer:
    engine = context.engine
    if context.inbound.chat_kind != "private":
        return CommandAnswer("Use /unlink in a private chat with me.", ok=False)
    person = engine.store.unlink(context.route.account)
    if person is None:
        return CommandAnswer("This account is not linked to any other.", ok=False)
    session = engine.store.private_session(person.id, engine.personas.default.id)
    return CommandAnswer(
        "Unlinked. This account now has a conversation of its own; "
        "the shared one stays with your other accounts.",
        session_id=session.id,
    )


async def new_command(context: CommandContext, _args: str) -> CommandAnswer:
    engine = context.engine
    inbound = context.inbound
    old = engine.store.get_session(context.route.session.id) or context.route.session
    fresh = engine.store.start_new_session(old, inbound.lane, inbound.chat_id, inbound.thread_id)
    return CommandAnswer(
        f"Started a new conversation. The previous one is saved as {old.id[:8]} "
        f"(export it with `chorus export {old.id[:8]}`).",
        session_id=fresh.id,
    )


def register_core_commands(registry: CommandRegistry) -> None:
    registry.add(Command("help", "show the commands", help_command))
    registry.add(Command("start", "greet and show how to begin", start_command))
    registry.add(Command("persona", "list personas or switch: /persona <id>", persona_command, usage="[id]"))
    registry.add(Command("status", "show persona, model and context use", status_command))
    registry.add(
        Command(
            "link",
            "link this account with another app: /link or /link CODE",
            link_command,
            usage="[CODE]",
        )
    )
    registry.add(Command("unlink", "detach this account from linked ones", unlink_command))
    registry.add(Command("new", "start a fresh conversation (the old one stays saved)", new_command))
