"""The one shape every lane hands to the engine."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

# The name a lane registers under in `channels.registry` ("telegram", "web", ...), or
# "terminal" for `chorus chat`. A plain string, so a new lane needs no change here.
LaneName = str
ChatKind = Literal["private", "group"]
# "voice": a recording sent as a message (voice note, round video, the widget's recorder);
# "audio": an audio file. The store checks the kind a lane gives against the file's type.
AttachmentKind = Literal["image", "document", "audio", "voice"]


def kind_of_file(mime_type: str) -> AttachmentKind:
    """What a file sent as a file is, by its type: an image, an audio file or a document."""
    if mime_type.startswith("image/"):
        return "image"
    return "audio" if mime_type.startswith("audio/") else "document"


@dataclass(frozen=True)
class Actor:
    """Who sent a message, as the platform describes them."""

    user_id: str
    display_name: str
    username: str | None = None
    is_bot: bool = False


@dataclass(frozen=True)
class ReplyTo:
    """The message an inbound message answers, when the platform says so."""

    message_id: str
    text: str | None = None
    sender_name: str | None = None


@dataclass(frozen=True)
class InboundAttachment:
    """An attachment not yet stored: `fetch` returns its bytes on demand."""

    kind: AttachmentKind
    filename: str
    mime_type: str
    size: int | None
    fetch: Callable[[], Awaitable[bytes]]
    # Voice notes and audio: the length the platform states, so a too-long one is refused
    # before it is downloaded (the stored length is measured by decoding).
    duration_seconds: float | None = None


@dataclass(frozen=True)
class InboundMessage:
    """A platform event translated into Chorus terms."""

    lane: LaneName
    platform_message_id: str
    chat_id: str
    chat_kind: ChatKind
    actor: Actor
    text: str
    thread_id: str | None = None
    was_mentioned: bool = False
    reply_to: ReplyTo | None = None
    attachments: tuple[InboundAttachment, ...] = field(default_factory=tuple)
    received_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    # Called once the message is safely stored (or found stored already): a lane
    # confirms receipt to its platform only then, so a crash before it loses nothing.
    on_stored: Callable[[], None] | None = field(default=None, compare=False, repr=False)
