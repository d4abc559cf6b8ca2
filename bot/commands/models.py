"""Model commands: /model (which model this conversation speaks with) and /think (how hard it thinks).

Both are stored with the session, so every lane of the conversation and every later
turn (and its compaction and memory distillation) use them.
"""

from __future__ import annotations

from bot.commands.registry import Command, CommandContext
from bot.conversation_model import THINKING_LEVELS, find_choice
from bot.turns.events import CommandAnswer

MODEL_USAGE = "Usage: /model NAME to switch this conversation's model, /model default to go back."
THINK_USAGE = "Usage: /think off, /think low or /think high."
# How /model and /status name the offline demo model, which answers when no model server is set.
DEMO_MODEL = "demo (offline demo model — set CHORUS_MODEL_BASE_URL for a real one)"


async def model_command(context: CommandContext, args: str) -> CommandAnswer:
    engine = context.engine
    session = context.session
    choice = args.strip()
    if not choice:
        return CommandAnswer(_models_text(context))
    if choice.lower() == "default":
        await engine.db.run(engine.stores.sessions.set_model_choice, session.id, None)
        persona = engine.persona_for(session)
        return CommandAnswer(f"Back to {persona.name}'s model: {engine.model_shown(session, persona)}.")
    entry = find_choice(engine.settings, choice)
    if entry is None:
        return CommandAnswer(f"There is no model '{choice}' here.\n\n{_models_text(context)}", ok=False)
    await engine.db.run(engine.stores.sessions.set_model_choice, session.id, entry.name)
    return CommandAnswer(
        f"This conversation now speaks with {entry.name} ({entry.model}); the history stays as it is. "
        "/model default goes back."
    )


def _models_text(context: CommandContext) -> str:
    engine = context.engine
    session = context.session
    persona = engine.persona_for(session)
    current = engine.conversation_model(session, persona)
    # Named as /status and /context name it: without a model server, the demo answers every choice.
    shown = engine.model_shown(session, persona)
    if engine.provider.name == "demo":
        shown = DEMO_MODEL
    if not engine.settings.models:
        return f"This conversation speaks with {shown}; this deployment offers no other models."
    lines = [f"This conversation speaks with {current.choice or 'default'} ({shown}). Models:"]
    lines.append(f"• default: {engine.settings.model.model_for(persona.model)} ({persona.name}'s)")
    for entry in engine.settings.models:
        takes = [
            name
            for name, flag in (("tools", entry.tools), ("images", entry.vision), ("thinking", entry.thinking))
            if flag
        ]
        lines.append(f"• {entry.name}: {entry.model}" + (f" ({', '.join(takes)})" if takes else ""))
    lines.append(MODEL_USAGE)
    return "\n".join(lines)


async def think_command(context: CommandContext, args: str) -> CommandAnswer:
    engine = context.engine
    session = context.session
    level = args.strip().lower()
    model = engine.conversation_model(session, engine.persona_for(session))
    if not level:
        state = session.thinking or "the model's default"
        return CommandAnswer(f"Thinking: {state}. {THINK_USAGE}")
    if level not in THINKING_LEVELS:
        return CommandAnswer(THINK_USAGE, ok=False)
    if not model.thinking:
        return CommandAnswer(
            f"{model.model} takes no thinking level, so /think changes nothing for it. "
            "/model lists the models that do.",
            ok=False,
        )
    await engine.db.run(engine.stores.sessions.set_thinking, session.id, level)
    return CommandAnswer(f"Thinking is {level} for this conversation's {model.model}.")


COMMANDS = (
    Command(
        "model",
        "list the models, or switch this conversation's: /model NAME",
        model_command,
        usage="[name | default]",
    ),
    Command(
        "think", "how hard the model thinks: /think off|low|high", think_command, usage="off | low | high"
    ),
)
