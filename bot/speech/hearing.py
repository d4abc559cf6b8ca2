"""Hearing voice notes: each stored recording's transcript, heard once per file.

The turn engine hands every voice note and audio file it stores to `Hearing.hear` before
the message is written, so the transcript commits with the attachment (as a document's
text does). A file whose content hash was heard before is not sent again: the store
shares the first copy's transcript. With no speech service, or when it fails, the
attachment is stored without a transcript and the reason comes back for the person;
`chorus speech transcribe` hears such recordings later (`bot.speech.backfill`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from bot.errors import AudioUnreadable, SpeechError, SpeechRejected, SpeechUnavailable
from bot.metrics import SPEECH_FAILURES, SPEECH_SECONDS
from bot.speech.audio import decode
from bot.speech.service import SpeechService
from bot.storage.message_append import NewAttachment
from transcript.audio import format_duration
from transcript.rows import AUDIO_KINDS

log = logging.getLogger(__name__)

NO_SERVICE = "no speech-to-text service is set up here"
# Outcomes kept per content hash, so a group's voice note heard to see whether it names the
# bot is not sent to the service a second time when it is stored a moment later.
RECENT_OUTCOMES = 64


@dataclass(frozen=True)
class Unheard:
    """Why a voice note has no transcript, and how long it was (for the person's notice)."""

    reason: str
    seconds: float | None

    def notice(self) -> str:
        length = f" It is {format_duration(self.seconds)} long." if self.seconds is not None else ""
        return (
            f"[I couldn't listen to your voice note: {self.reason}.{length} Please type what you said; "
            "the recording is kept and can be transcribed later.]"
        )


@dataclass(frozen=True)
class Heard:
    """An attachment as it will be stored, and why it went unheard (None: heard, or not audio)."""

    attachment: NewAttachment
    unheard: Unheard | None = None


# Returns the transcript already stored for a content hash, or None.
StoredTranscript = Callable[[str], Awaitable[str | None]]


class Hearing:
    def __init__(self, service: SpeechService | None, data_dir: Path, max_seconds: float) -> None:
        self.service = service
        self.data_dir = data_dir
        self.max_seconds = max_seconds
        self._recent: OrderedDict[str, str | Unheard] = OrderedDict()

    async def hear(self, attachment: NewAttachment, stored_transcript: StoredTranscript) -> Heard:
        """`attachment` with its transcript when it is a recording the service heard."""
        if attachment.kind not in AUDIO_KINDS:
            return Heard(attachment)
        if await stored_transcript(attachment.sha256) is not None:
            # Heard before: the stored copy's transcript is shared, not stored twice.
            return Heard(attachment)
        outcome = self._recent.get(attachment.sha256)
        if outcome is None:
            outcome = await self._listen(attachment)
            self._remember(attachment.sha256, outcome)
        if isinstance(outcome, Unheard):
            return Heard(attachment, outcome)
        return Heard(replace(attachment, text=outcome))

    async def transcribe_file(self, relative_path: str, filename: str) -> str:
        """The transcript of a stored recording; raises `SpeechError` or `AudioUnreadable`."""
        if self.service is None:
            raise SpeechError(f"Set speech.base_url: {NO_SERVICE}.")
        decoded = await asyncio.to_thread(decode, self.data_dir / relative_path, filename, self.max_seconds)
        text = await self.service.transcribe(decoded.wav(), _wav_name(filename))
        SPEECH_SECONDS.labels("transcribed").inc(decoded.seconds)
        return text

    async def _listen(self, attachment: NewAttachment) -> str | Unheard:
        seconds = attachment.duration_seconds
        if self.service is None:
            SPEECH_FAILURES.labels("transcribe", "no_service").inc()
            return Unheard(NO_SERVICE, seconds)
        try:
            return await self.transcribe_file(attachment.path, attachment.filename)
        except (SpeechError, AudioUnreadable) as error:
            SPEECH_FAILURES.labels("transcribe", failure_reason(error)).inc()
            log.warning("voice note %s not transcribed: %s", attachment.sha256[:12], error)
            return Unheard(_reason(error), seconds)

    def _remember(self, sha256: str, outcome: str | Unheard) -> None:
        self._recent[sha256] = outcome
        self._recent.move_to_end(sha256)
        while len(self._recent) > RECENT_OUTCOMES:
            self._recent.popitem(last=False)


def failure_reason(error: Exception) -> str:
    """The metric label of a speech failure."""
    if isinstance(error, SpeechUnavailable):
        return "unavailable"
    if isinstance(error, SpeechRejected):
        return "rejected"
    if isinstance(error, AudioUnreadable):
        return "unreadable"
    return "failed"


def names_spoken(transcript: str, names: Iterable[str]) -> bool:
    """Whether a transcript says one of `names` as a word ("hey Ada," names Ada; "Adam" does not)."""
    for name in names:
        cleaned = name.strip().lstrip("@")
        if cleaned and re.search(rf"(?<!\w){re.escape(cleaned)}(?!\w)", transcript, re.IGNORECASE):
            return True
    return False


def _reason(error: Exception) -> str:
    # The error's own sentence ends with advice for an operator; the person gets its gist.
    text = str(error).rstrip(".")
    return text[0].lower() + text[1:] if text else "the speech service failed"


def _wav_name(filename: str) -> str:
    return f"{Path(filename).stem or 'voice'}.wav"
