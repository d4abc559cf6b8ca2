"""The Discord lane: a discord.py 2 client that turns gateway events into `InboundMessage`s.

Owns Discord's rules — DMs vs guild channels and threads, mention/reply activation,
allow-lists, attachments, slash commands, typing, throttled draft edits and the
2000-character limit. It hands every message to the engine and must not touch the
database or the model, build history, or implement commands itself.

Importing this package imports no discord.py: `build` does, when the lane runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.runtime import Runtime
    from channels.discord.lane import DiscordLane


def build(runtime: Runtime) -> DiscordLane:
    from channels.discord.lane import DiscordLane

    return DiscordLane(runtime)
