"""Stored messages and attachments as the transcript's rows, as every read of them gives them back.

`MessageStore`'s reads, the console, the widget's history and export turn stored rows into
`TranscriptRow`s, `AttachmentRef`s and tool calls here, so all of them read a row the same way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import func, select
from sqlalchemy.engine import Row

from bot.storage.models import Attachment, Message, as_utc, table_of
from transcript import AttachmentRef, StoredToolCall, TranscriptRow
from transcript.kinds import check_row
from transcript.rows import AttachmentKind

ATTACHMENTS = table_of(Attachment)
# A document's text is stored once per content hash: later uploads of the same file
# keep NULL and read the text of the first row that has it.
_SHARED = ATTACHMENTS.alias("shared")
SHARED_TEXT = (
    select(_SHARED.c.text)
    .where(_SHARED.c.sha256 == ATTACHMENTS.c.sha256, _SHARED.c.text.is_not(None))
    .limit(1)
    .scalar_subquery()
)
ATTACHMENT_COLUMNS = (
    *(column for column in ATTACHMENTS.c if column.name != "text"),
    func.coalesce(ATTACHMENTS.c.text, SHARED_TEXT).label("text"),
)


def transcript_row(message: Message, attachments: Sequence[Attachment | Row[Any]]) -> TranscriptRow:
    kind, role, status = check_row(message.kind, message.role, message.status)
    return TranscriptRow(
        seq=message.seq,
        role=role,
        content=message.content,
        persona_id=message.persona_id,
        sender_id=message.sender_id,
        sender_name=message.sender_name,
        attachments=tuple(attachment_ref(attachment) for attachment in attachments),
        status=status,
        token_count=message.token_count,
        created_at=as_utc(message.created_at).isoformat(),
        kind=kind,
        tool_calls=decode_calls(message.tool_calls),
        tool_call_id=message.tool_call_id,
        tool_name=message.tool_name,
        provider_blocks=decode_blocks(message.provider_blocks),
    )


def encode_calls(calls: Sequence[StoredToolCall]) -> str | None:
    """A `tool_call` row's calls as stored: JSON, each call's arguments exactly as the model sent them."""
    if not calls:
        return None
    return json.dumps(
        [{"id": call.id, "name": call.name, "arguments": call.arguments} for call in calls],
        ensure_ascii=False,
    )


def decode_calls(stored: str | None) -> tuple[StoredToolCall, ...]:
    if not stored:
        return ()
    return tuple(StoredToolCall(call["id"], call["name"], call["arguments"]) for call in json.loads(stored))


def encode_blocks(blocks: object) -> str | None:
    """A row's provider blocks as stored: JSON, exactly as the provider gave them."""
    return None if blocks is None else json.dumps(blocks, ensure_ascii=False)


def decode_blocks(stored: str | None) -> object:
    return json.loads(stored) if stored else None


def attachment_ref(attachment: Attachment | Row[Any]) -> AttachmentRef:
    return AttachmentRef(
        kind=attachment_kind(attachment.kind),
        filename=attachment.filename,
        mime_type=attachment.mime_type,
        size=attachment.size,
        sha256=attachment.sha256,
        text=attachment.text,
        duration_seconds=attachment.duration_seconds,
    )


def attachment_kind(stored: str) -> AttachmentKind:
    """A stored kind as `transcript` knows it; anything unknown is read as a document."""
    if stored in ("image", "audio", "voice"):
        return cast(AttachmentKind, stored)
    return "document"
