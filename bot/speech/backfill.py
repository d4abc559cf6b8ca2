"""`chorus speech transcribe`: hear the voice notes stored while no speech service could.

Each file (by content hash) is heard once, oldest first; its transcript is stored on its
first copy and every copy shows it from then on. A file the service still cannot hear is
left for the next run, so running it again after a failure loses nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.errors import AudioUnreadable, SpeechError
from bot.speech.hearing import Hearing
from bot.storage.boundary import boundary_for
from bot.storage.messages import MessageStore

log = logging.getLogger(__name__)

BATCH = 50


@dataclass(frozen=True)
class BackfillResult:
    heard: int
    failed: int


async def transcribe_stored(messages: MessageStore, hearing: Hearing) -> BackfillResult:
    """Every stored recording without a transcript, heard now (those that fail stay for next time)."""
    db = boundary_for(messages.database)
    heard = failed = 0
    skipped: set[int] = set()
    while True:
        batch = [
            row
            for row in await db.run(messages.unheard_recordings, BATCH + len(skipped))
            if row.id not in skipped
        ]
        if not batch:
            return BackfillResult(heard, failed)
        for row in batch:
            try:
                text = await hearing.transcribe_file(row.path, row.filename)
            except (SpeechError, AudioUnreadable) as error:
                log.warning("recording %s (%s) not transcribed: %s", row.id, row.filename, error)
                skipped.add(row.id)
                failed += 1
                continue
            await db.run(messages.store_transcript, row.id, text)
            heard += 1
