"""The Telegram lane: an aiogram 3 bot that turns updates into `InboundMessage`s.

Owns polling and webhook delivery, mention rules in groups, albums and file
downloads, and Telegram's reply rules (typing, throttled draft edits, 4096-character
parts, flood control, formatting fallback). It must not touch the database or the
model, build history, or implement commands: the engine does all of that.

Importing this package imports no aiogram: `build` does, when the lane runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.runtime import Runtime
    from channels.telegram.lane import TelegramLane


def build(runtime: Runtime) -> TelegramLane:
    from channels.telegram.lane import TelegramLane

    return TelegramLane(runtime)
