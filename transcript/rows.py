"""The row shapes `transcript` reads: stored messages as plain, frozen values.

The storage layer converts its database rows into these before calling any
transcript function, so this package never sees a database object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from transcript.kinds import MessageKind, Role, Status

# "voice": a recording made to be a message (a voice note, a round video message, a
# recording in the widget); "audio": an audio file someone sent. Both are heard alike.
AttachmentKind = Literal["image", "document", "audio", "voice"]
AUDIO_KINDS: frozenset[str] = frozenset({"audio", "voice"})


@dataclass(frozen=True)
class AttachmentRef:
    """An attachment stored by reference next to a message."""

    kind: AttachmentKind
    filename: str
    mime_type: str
    size: int
    sha256: str
    # Documents keep their extracted text, voice notes and audio their transcript; None when
    # nothing could be extracted or the recording was not transcribed (yet).
    text: str | None = None
    # Voice notes and audio: the length measured when the file was decoded at arrival.
    duration_seconds: float | None = None
    # For images, filled by the caller (a downscaled data: URL) only when the
    # model can see images; transcript itself never reads files.
    data_url: str | None = None


@dataclass(frozen=True)
class StoredToolCall:
    """One call of an assistant message that called tools, as the model sent it."""

    id: str
    name: str
    # The model's JSON text, unparsed: sent back exactly as the model wrote it.
    arguments: str


@dataclass(frozen=True)
class TranscriptRow:
    """One stored message of a session, oldest first by `seq`."""

    seq: int
    role: Role
    content: str
    persona_id: str | None = None
    sender_id: str | None = None
    sender_name: str | None = None
    attachments: tuple[AttachmentRef, ...] = field(default_factory=tuple)
    status: Status = "complete"
    token_count: int | None = None
    created_at: str | None = None
    # What the row is (see `transcript.kinds`): a conversation message, or an event.
    kind: MessageKind = "message"
    # An assistant row that called tools carries its calls; each result is a `tool` row
    # answering one of them by id (`status` "failed" when the tool reported an error).
    tool_calls: tuple[StoredToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    # An assistant row's answer in its provider's own blocks (signed thinking, a call's
    # `extra_content`), opaque here: carried to the row's message under `PROVIDER_BLOCKS_KEY`
    # for that provider to replay.
    provider_blocks: object = field(default=None, hash=False)
