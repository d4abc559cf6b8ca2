"""Speaking replies: a reply's words as audio parts a lane can send (`/voice on`).

A lane says what it can send (`SpeechTarget`: the format, the characters one part may
hold, the bytes a file may have); the reply is read as plain words, cut at sentence ends
into parts, and each part is spoken by the speech service. Audio the service sends in
another format than the lane needs (a local server that only speaks WAV) is re-encoded
with ffmpeg. The stored reply stays text: speaking it stores nothing.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from bot.errors import AudioUnreadable, SpeechError
from bot.metrics import SPEECH_FAILURES, SPEECH_SECONDS
from bot.speech.audio import OutputFormat, container_of, decode_bytes, encode
from bot.speech.hearing import failure_reason
from bot.speech.service import SPEECH_INPUT_CHARS, SpeechFormat, SpeechService
from bot.speech.spoken_text import spoken_parts, spoken_text

log = logging.getLogger(__name__)

NO_SERVICE = "Spoken replies need a speech service: an operator sets speech.base_url (see docs/voice.md)."
# What a part is measured against when it is decoded to count its seconds.
LONGEST_PART_SECONDS = 3600.0
_REQUESTED: dict[OutputFormat, SpeechFormat] = {"ogg_opus": "opus", "mp3": "mp3"}
_FILES: dict[OutputFormat, tuple[str, str]] = {"ogg_opus": ("audio/ogg", "ogg"), "mp3": ("audio/mpeg", "mp3")}


@dataclass(frozen=True)
class SpeechTarget:
    """What a lane can send: the audio format, characters per part, bytes per file."""

    audio_format: OutputFormat
    max_chars: int
    max_bytes: int

    @property
    def chars_per_part(self) -> int:
        return min(self.max_chars, SPEECH_INPUT_CHARS)


@dataclass(frozen=True)
class SpokenPart:
    audio: bytes
    mime_type: str
    filename: str
    seconds: float
    text: str


class Speaking:
    def __init__(self, service: SpeechService | None) -> None:
        self.service = service

    @property
    def available(self) -> bool:
        return self.service is not None

    def parts_of(self, reply: str, target: SpeechTarget) -> list[str]:
        """The texts `speak` turns into audio, one per part."""
        return spoken_parts(spoken_text(reply), target.chars_per_part)

    async def speak(self, reply: str, target: SpeechTarget) -> list[SpokenPart]:
        """Every part of `reply`, spoken; raises `SpeechError` with a sentence for the person."""
        texts = self.parts_of(reply, target)
        return [await self.speak_part(text, index, target) for index, text in enumerate(texts)]

    async def speak_part(self, text: str, index: int, target: SpeechTarget) -> SpokenPart:
        if self.service is None:
            SPEECH_FAILURES.labels("synthesise", "no_service").inc()
            raise SpeechError(NO_SERVICE)
        try:
            audio = await self.service.synthesise(text, _REQUESTED[target.audio_format])
            audio, seconds = await asyncio.to_thread(_as_format, audio, target.audio_format)
        except (SpeechError, AudioUnreadable) as error:
            SPEECH_FAILURES.labels("synthesise", failure_reason(error)).inc()
            log.warning("reply part %d not spoken: %s", index, error)
            if isinstance(error, AudioUnreadable):
                raise SpeechError("The speech service sent audio that cannot be played.") from error
            raise
        if len(audio) > target.max_bytes:
            SPEECH_FAILURES.labels("synthesise", "too_large").inc()
            raise SpeechError(
                f"The spoken reply is too large to send here ({len(audio) / 1_048_576:.1f} MB; "
                f"the limit is {target.max_bytes / 1_048_576:.1f} MB)."
            )
        SPEECH_SECONDS.labels("synthesised").inc(seconds)
        mime_type, extension = _FILES[target.audio_format]
        return SpokenPart(audio, mime_type, f"reply-{index + 1}.{extension}", seconds, text)


def _as_format(audio: bytes, wanted: OutputFormat) -> tuple[bytes, float]:
    """The audio in `wanted` (re-encoded only when it is not), and its length in seconds."""
    if container_of(audio) != wanted:
        audio = encode(audio, wanted)
    return audio, decode_bytes(audio, "spoken reply", LONGEST_PART_SECONDS).seconds
