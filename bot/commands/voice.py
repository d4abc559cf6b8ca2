"""Voice commands: /voice on|off, spoken replies for this conversation."""

from __future__ import annotations

from bot.commands.registry import Command, CommandEngine
from bot.commands.switches import SessionSwitch
from bot.speech.speaking import NO_SERVICE
from bot.storage.sessions import SessionStore

VOICE_USAGE = "Usage: /voice on (replies also come as voice messages) or /voice off (text only)."


def _no_speech_service(engine: CommandEngine) -> str | None:
    return None if engine.speaking.available else NO_SERVICE


voice_command = SessionSwitch(
    read=SessionStore.is_spoken,
    write=SessionStore.set_spoken,
    usage=VOICE_USAGE,
    state=lambda spoken: (
        "Spoken replies are "
        + ("on: replies also come as voice messages." if spoken else "off: replies are text only.")
    ),
    turned_on="Spoken replies are on: each reply also comes as a voice message. /voice off stops them.",
    turned_off="Spoken replies are off: replies are text only.",
    unavailable=_no_speech_service,
)

COMMANDS = (Command("voice", "spoken replies: /voice on or /voice off", voice_command, usage="on | off"),)
