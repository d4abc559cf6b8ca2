"""Reasoning commands: /reasoning on|off, the model's thinking shown beside its replies."""

from __future__ import annotations

from bot.commands.registry import Command
from bot.commands.switches import SessionSwitch
from bot.storage.sessions import SessionStore

REASONING_USAGE = "Usage: /reasoning on (show the model's thinking, folded) or /reasoning off (hide it)."

reasoning_command = SessionSwitch(
    read=SessionStore.shows_reasoning,
    write=SessionStore.set_shows_reasoning,
    usage=REASONING_USAGE,
    state=lambda shown: f"The model's thinking is {'shown beside each reply' if shown else 'hidden'}.",
    turned_on=(
        "Reasoning is on: when the model thinks before answering, its thinking comes folded "
        "beside the reply. /reasoning off hides it."
    ),
    turned_off="Reasoning is off: only the replies are shown.",
)

COMMANDS = (
    Command(
        "reasoning", "show the model's thinking: /reasoning on or off", reasoning_command, usage="on | off"
    ),
)
