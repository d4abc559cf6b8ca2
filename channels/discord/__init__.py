"""The Discord lane: a discord.py 2 client that turns gateway events into `InboundMessage`s.

Owns Discord's rules — DMs vs guild channels and threads, mention/reply activation,
allow-lists, attachments, slash commands, typing, throttled draft edits and the
2000-character limit. It hands every message to the engine and must not touch the
database or the model, build history, or implement commands itself.
"""

from __future__ import annotations

from channels.discord.lane import DiscordLane

__all__ = ["DiscordLane"]
