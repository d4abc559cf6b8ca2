"""General commands: /help, /start, /status and /stop."""

from __future__ import annotations

from bot.commands.models import DEMO_MODEL
from bot.commands.registry import Command, CommandContext
from bot.turns.events import CommandAnswer


async def help_command(context: CommandContext, _args: str) -> CommandAnswer:
    return CommandAnswer(context.commands.help_text())


async def start_command(context: CommandContext, _args: str) -> CommandAnswer:
    persona = context.engine.persona_for(context.session)
    greeting = persona.greeting or f"Hi, I'm {persona.name}."
    return CommandAnswer(f"{greeting}\n\nSend /help to see the commands, /persona to change voice.")


async def status_command(context: CommandContext, _args: str) -> CommandAnswer:
    engine = context.engine
    session = context.session
    persona = engine.persona_for(session)
    built = await engine.inspect(session)
    stats = built.stats
    model = engine.conversation_model(session, persona)
    model_line = f"{engine.model_shown(session, persona)} via {engine.provider.name}"
    if model.choice:
        model_line += f" (/model {model.choice})"
    if engine.provider.name == "demo":
        model_line = DEMO_MODEL
    share = stats.total_tokens / stats.budget_tokens if stats.budget_tokens else 0.0
    lines = [
        f"Persona: {persona.name} ({persona.id})",
        f"Model: {model_line}",
    ]
    if session.thinking and model.thinking:
        lines.append(f"Thinking: {session.thinking}")
    set_here = {"temperature": persona.temperature, "top_p": persona.top_p}
    left_out = [
        name for name in engine.provider.left_out_settings(model.model) if set_here.get(name) is not None
    ]
    if left_out:
        them = "it" if len(left_out) == 1 else "them"
        lines.append(
            f"Left out: {persona.name}'s {' and '.join(left_out)} (the model's client cannot send {them})"
        )
    answered = await engine.db.run(engine.stores.messages.last_reply_model, session.id)
    if answered:
        fallback = answered != engine.model_shown(session, persona)
        lines.append(
            f"Last reply by: {answered}"
            + (" (a fallback: the usual model could not answer)" if fallback else "")
        )
    lines += [
        f"Session: {session.id[:8]} ({session.kind}), {session.last_seq} stored messages",
        f"Context: {stats.total_tokens:,} of {stats.budget_tokens:,} tokens ({share:.0%}), "
        f"{stats.messages_kept} messages in the window, {stats.messages_dropped} left out",
    ]
    return CommandAnswer("\n".join(lines))


async def stop_command(context: CommandContext, _args: str) -> CommandAnswer:
    session_id = context.route.session.id
    # A call waiting for a yes, in this process or another, will not run whatever is clicked later.
    cancelled = await context.engine.cancel_approvals(session_id)
    if context.engine.stop_turn(session_id) or cancelled:
        return CommandAnswer("Stopped.")
    return CommandAnswer("Nothing to stop.")


COMMANDS = (
    Command("help", "show the commands", help_command),
    Command("start", "greet and show how to begin", start_command),
    Command("status", "show persona, model and context use", status_command),
    Command("stop", "stop the reply being written", stop_command, waits_for_turn=False),
)
