"""Spoken replies in the widget: each part of a reply as MP3, which every browser plays.

The final `done` event lists the paths of the parts; the widget fetches them with the
visitor's token and shows a player. A part is spoken when it is asked for, so a reply no
one plays costs nothing.
"""

from __future__ import annotations

from bot.speech.speaking import Speaking, SpeechTarget
from bot.turns.events import Reply

WIDGET_AUDIO = SpeechTarget(audio_format="mp3", max_chars=4096, max_bytes=25 * 1024 * 1024)


def speech_path(session_id: str, message_id: int, part: int) -> str:
    return f"/api/sessions/{session_id}/messages/{message_id}/speech/{part}"


def speech_paths(reply: Reply, speaking: Speaking) -> list[str]:
    """Where the widget fetches the parts of a reply to be spoken; none when it is not."""
    if not reply.spoken_text or reply.session_id is None or reply.message_id is None:
        return []
    parts = speaking.parts_of(reply.spoken_text, WIDGET_AUDIO)
    return [speech_path(reply.session_id, reply.message_id, index) for index in range(len(parts))]
