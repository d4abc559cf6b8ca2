"""A conversation's stored rows as a reader outside `bot` sees them: pages of messages and
events with their files, one file, the stored answer to a message.

The web lane's history, file downloads and retried posts read through here, off the event
loop, and get plain values back rather than database rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Row

from bot.storage.boundary import boundary_for
from bot.storage.message_rows import decode_calls
from bot.storage.messages import MessageStore
from bot.storage.models import Attachment, Message, as_utc
from bot.storage.sessions import SessionStore
from transcript.kinds import REPLY_KIND, MessageKind, Role, Status, check_row
from transcript.rows import StoredToolCall

# What reaches a conversation without a person asking: pushed to its open widgets.
PUSHED_KINDS: tuple[MessageKind, ...] = ("reminder",)

if TYPE_CHECKING:
    from bot.runtime import Runtime


@dataclass(frozen=True)
class StoredFile:
    id: int
    session_id: str
    kind: str
    filename: str
    mime_type: str
    size: int
    # Relative to the data directory (`AttachmentStore.path_of` finds the file).
    path: str


@dataclass(frozen=True)
class StoredEntry:
    """One stored row: a conversation message, or an event (see `transcript.kinds`)."""

    id: int
    seq: int
    kind: MessageKind
    role: Role
    content: str
    status: Status
    persona_id: str | None
    sender_name: str | None
    lane: str | None
    created_at: datetime
    files: tuple[StoredFile, ...] = ()
    # A `tool_call` row's calls (name and arguments as the model sent them).
    tool_calls: tuple[StoredToolCall, ...] = ()


class ConversationHistory:
    def __init__(self, messages: MessageStore, sessions: SessionStore) -> None:
        self.messages = messages
        self.sessions = sessions
        self.db = boundary_for(messages.database)

    @classmethod
    def of(cls, runtime: Runtime) -> ConversationHistory:
        return cls(runtime.stores.messages, runtime.stores.sessions)

    async def page(self, session_id: str, *, before_seq: int | None, limit: int) -> list[StoredEntry]:
        """Up to `limit` rows before `before_seq` (the newest when None), oldest first."""
        return await self.db.run(self._page, session_id, before_seq, limit)

    def _page(self, session_id: str, before_seq: int | None, limit: int) -> list[StoredEntry]:
        rows = self.messages.messages(session_id, before_seq=before_seq, limit=limit)
        files = self.messages.attachments_for(
            row.id for row in rows if row.id is not None and row.attachment_count
        )
        # The model's thinking is part of the history only while the session shows it (/reasoning on).
        hidden = () if self.sessions.shows_reasoning(session_id) else ("reasoning",)
        return [
            _entry(row, files.get(row.id, []))
            for row in rows
            if row.id is not None and row.kind not in hidden
        ]

    async def pushed_after(self, session_id: str, after_seq: int, limit: int = 50) -> list[StoredEntry]:
        """Rows a session's open widgets are sent as they are stored (reminders), after `after_seq`."""
        rows = await self.db.run(self.messages.messages_after, session_id, after_seq, PUSHED_KINDS, limit)
        return [_entry(row, []) for row in rows if row.id is not None]

    async def file(self, attachment_id: int) -> StoredFile | None:
        found = await self.db.run(self.messages.get_attachment, attachment_id)
        return _file(found) if found is not None else None

    async def reply_in(self, session_id: str, message_id: int) -> StoredEntry | None:
        """A persona's reply stored in the conversation `session_id`, if `message_id` is one."""
        found = await self.db.run(self.messages.get_message, message_id)
        if found is None or found.id is None or found.session_id != session_id:
            return None
        if found.role != "assistant" or found.kind != REPLY_KIND:
            return None
        return _entry(found, [])

    async def answer_to(self, user_message_id: int) -> StoredEntry | None:
        """The reply stored for a user message, if there is one."""
        found = await self.db.run(self.messages.reply_to, user_message_id)
        return _entry(found, []) if found is not None and found.id is not None else None


def _entry(row: Message, files: Sequence[Row[Any]]) -> StoredEntry:
    kind, role, status = check_row(row.kind, row.role, row.status)
    return StoredEntry(
        id=row.id or 0,
        seq=row.seq,
        kind=kind,
        role=role,
        content=row.content,
        status=status,
        persona_id=row.persona_id,
        sender_name=row.sender_name,
        lane=row.lane,
        created_at=as_utc(row.created_at),
        files=tuple(_file(item) for item in files),
        tool_calls=decode_calls(row.tool_calls),
    )


def _file(item: Attachment | Row[Any]) -> StoredFile:
    return StoredFile(
        id=item.id or 0,
        session_id=item.session_id,
        kind=item.kind,
        filename=item.filename,
        mime_type=item.mime_type,
        size=item.size,
        path=item.path,
    )
