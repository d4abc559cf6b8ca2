"""The Telegram lane: an aiogram 3 bot that turns updates into `InboundMessage`s.

Owns polling and webhook delivery, mention rules in groups, albums and file
downloads, and Telegram's reply rules (typing, throttled draft edits, 4096-character
parts, flood control, formatting fallback). It must not touch the database or the
model, build history, or implement commands: the engine does all of that.
"""

from channels.telegram.lane import TelegramLane

__all__ = ["TelegramLane"]
