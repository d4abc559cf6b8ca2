"""Appending a message: the hottest write of a turn, one transaction.

It bumps the session's sequence, inserts the message, its full-text row (search finds
what was said, not the events around it), its attachments, its delivery state (a user
message that starts a turn) or the close of it (the reply), and the jobs it asks for.
`MessageStore.append` runs it; what a caller hands in and gets back is defined here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.engine import Connection

from bot.errors import StorageConflict
from bot.storage.delivery_models import Delivery
from bot.storage.index_text import INDEX_MESSAGE, INDEX_MESSAGE_POSTGRES, message_index_text, owner_token
from bot.storage.jobs import JobRequest, JobSink, JobSpec
from bot.storage.message_rows import ATTACHMENTS, decode_blocks, decode_calls, encode_blocks, encode_calls
from bot.storage.models import ChatSession, Message, as_utc, table_of, utcnow
from bot.storage.prepared import Prepared
from bot.storage.sanitise import clean_optional, clean_text
from transcript import StoredToolCall, TranscriptRow
from transcript.kinds import CONVERSATION_KINDS, SAID_KINDS, MessageKind, Role, Status, check_row, is_reply

SESSIONS = table_of(ChatSession)
MESSAGES = table_of(Message)
DELIVERIES = table_of(Delivery)
# Built once, so SQLAlchemy only binds values, and run as prepared statements
# (`bot.storage.prepared`): building and executing them per call would cost several
# times what the database takes to run them.
BUMP_SEQUENCE = Prepared(
    update(SESSIONS)
    .where(SESSIONS.c.id == bindparam("target_session"))
    .values(
        last_seq=SESSIONS.c.last_seq + 1,
        document_count=SESSIONS.c.document_count + bindparam("new_documents"),
        updated_at=bindparam("touched_at"),
    )
    .returning(SESSIONS.c.last_seq, SESSIONS.c.owner_kind, SESSIONS.c.owner_id)
)
INSERT_MESSAGE = Prepared(insert(MESSAGES).returning(MESSAGES.c.id))
INSERT_ATTACHMENT = insert(ATTACHMENTS)
INSERT_DELIVERY = Prepared(insert(DELIVERIES))
INDEX_SAID = Prepared(INDEX_MESSAGE)
INDEX_SAID_POSTGRES = Prepared(INDEX_MESSAGE_POSTGRES)
CLOSE_DELIVERY = Prepared(
    update(DELIVERIES)
    .where(DELIVERIES.c.user_message_id == bindparam("answered_message"), DELIVERIES.c.state == "open")
    .values(state="replied", updated_at=bindparam("touched_at"))
)
TEXT_STORED = (
    select(ATTACHMENTS.c.id)
    .where(ATTACHMENTS.c.sha256 == bindparam("sha256"), ATTACHMENTS.c.text.is_not(None))
    .limit(1)
)


@dataclass(frozen=True)
class NewAttachment:
    """An attachment already written to disk, ready to be recorded."""

    kind: str
    filename: str
    mime_type: str
    size: int
    sha256: str
    path: str
    text: str | None
    # Voice notes and audio: the length measured when the file was decoded.
    duration_seconds: float | None = None


@dataclass(frozen=True)
class DeliveryTarget:
    """For a message that asks for an answer: what a lane needs to deliver it later."""

    chat_kind: str
    thread_id: str | None
    # The process answering it now.
    owner: str


@dataclass(frozen=True)
class NewMessage:
    """Everything needed to append one message to a session."""

    role: Role
    content: str
    token_count: int
    persona_id: str | None = None
    sender_id: str | None = None
    sender_name: str | None = None
    lane: str | None = None
    platform_chat_id: str | None = None
    platform_message_id: str | None = None
    reply_to_id: int | None = None
    status: Status = "complete"
    created_at: datetime | None = None
    attachments: tuple[NewAttachment, ...] = ()
    # False for imported copies: they keep their platform ids but no idempotency key.
    live: bool = True
    # Set on a user message that starts a turn: its delivery state is stored with it.
    delivery: DeliveryTarget | None = None
    # Jobs to run after this message, enqueued in the transaction that stores it.
    jobs: tuple[JobSpec, ...] = ()
    # What the row is: a conversation message, or an event (see `transcript.kinds`).
    kind: MessageKind = "message"
    # A `tool_call` row's calls; a `tool_result` row's call id and tool name.
    tool_calls: tuple[StoredToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    # A reply's answering model.
    model: str | None = None
    # A `tool_call` row's or reply's answer in its provider's own blocks (signed thinking,
    # the `extra_content` of its calls).
    provider_blocks: object = None
    # A reply: the prompt tokens the server billed for its turn, read from and written to its cache.
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None


@dataclass(frozen=True)
class StoredMessage:
    """What `append` hands back: the new row's identity and what callers read of it."""

    id: int
    seq: int
    session_id: str
    role: Role
    content: str
    persona_id: str | None
    status: Status
    kind: MessageKind
    # The row exactly as `rows_after` would read it back; None for a row with attachments
    # (their stored form is only known once read).
    row: TranscriptRow | None = None


def row_once_stored(message: NewMessage, seq: int, created_at: datetime) -> TranscriptRow:
    """`message` (without attachments) as a read would give it back once stored at `seq`."""
    return _row(
        message,
        seq,
        created_at,
        clean_text(message.content),
        clean_optional(message.sender_name),
        encode_calls(message.tool_calls),
        encode_blocks(message.provider_blocks),
    )


def _row(
    message: NewMessage,
    seq: int,
    created_at: datetime,
    content: str,
    sender_name: str | None,
    stored_calls: str | None,
    stored_blocks: str | None,
) -> TranscriptRow:
    return TranscriptRow(
        seq=seq,
        role=message.role,
        content=content,
        persona_id=message.persona_id,
        sender_id=message.sender_id,
        sender_name=sender_name,
        status=message.status,
        token_count=message.token_count,
        created_at=as_utc(created_at).isoformat(),
        kind=message.kind,
        tool_calls=decode_calls(stored_calls),
        tool_call_id=message.tool_call_id,
        tool_name=message.tool_name,
        provider_blocks=decode_blocks(stored_blocks),
    )


class DuplicateMessage(StorageConflict):
    """The platform message was already stored (idempotent ingestion)."""

    def __init__(self, existing: Message) -> None:
        super().__init__(f"message {existing.id} already stored")
        self.existing = existing


def write_message(
    connection: Connection, session_id: str, message: NewMessage, jobs: JobSink | None
) -> StoredMessage:
    """Append `message` inside the caller's transaction; `jobs` takes the jobs it asks for."""
    created_at = message.created_at or utcnow()
    key = (
        ingest_key(message.lane, message.platform_chat_id, message.platform_message_id)
        if message.live
        else None
    )
    if message.jobs and jobs is None:
        raise ValueError("this store has no job queue for the jobs the message asks for")
    # A row no reader knows is refused here, before it is stored.
    check_row(message.kind, message.role, message.status)
    documents = sum(1 for attachment in message.attachments if attachment.kind == "document")
    content = clean_text(message.content)
    sender_name = clean_optional(message.sender_name)
    stored_calls = encode_calls(message.tool_calls)
    stored_blocks = encode_blocks(message.provider_blocks)
    values = {
        "session_id": session_id,
        "role": message.role,
        "content": content,
        "persona_id": message.persona_id,
        "sender_id": message.sender_id,
        "sender_name": sender_name,
        "lane": message.lane,
        "platform_chat_id": message.platform_chat_id,
        "platform_message_id": message.platform_message_id,
        "ingest_key": key,
        "reply_to_id": message.reply_to_id,
        "token_count": message.token_count,
        "attachment_count": len(message.attachments),
        "status": message.status,
        "created_at": created_at,
        "kind": message.kind,
        "tool_calls": stored_calls,
        "tool_call_id": message.tool_call_id,
        "tool_name": message.tool_name,
        "model": message.model,
        "provider_blocks": stored_blocks,
        "prompt_tokens": message.prompt_tokens,
        "cached_tokens": message.cached_tokens,
        "cache_write_tokens": message.cache_write_tokens,
    }
    ((seq, owner_kind, owner_id),) = BUMP_SEQUENCE.execute(
        connection,
        {"target_session": session_id, "new_documents": documents, "touched_at": created_at},
    )
    ((message_id,),) = INSERT_MESSAGE.execute(connection, {"seq": seq, **values})
    # Search finds what was said, not the events around it.
    if message.kind in SAID_KINDS:
        index_row = {
            "id": message_id,
            "owner": owner_token(owner_kind, owner_id),
            "content": message_index_text(sender_name, content, created_at),
        }
        if connection.dialect.name == "sqlite":
            INDEX_SAID.execute(connection, index_row)
        else:
            del index_row["owner"]
            INDEX_SAID_POSTGRES.execute(connection, index_row)
    if message.delivery is not None and key is not None:
        INSERT_DELIVERY.execute(
            connection,
            {
                "user_message_id": message_id,
                "session_id": session_id,
                "ingest_key": key,
                "lane": message.lane,
                "chat_id": message.platform_chat_id,
                "chat_kind": message.delivery.chat_kind,
                "thread_id": message.delivery.thread_id,
                "platform_message_id": message.platform_message_id,
                "state": "open",
                "owner": message.delivery.owner,
                "created_at": created_at,
                "updated_at": created_at,
            },
        )
    elif is_reply(message.kind, message.role) and message.reply_to_id is not None:
        # The reply and the end of its turn's open state commit together.
        CLOSE_DELIVERY.execute(
            connection, {"answered_message": message.reply_to_id, "touched_at": created_at}
        )
    if message.jobs and jobs is not None:
        jobs.enqueue(
            connection,
            [JobRequest.of(spec, session_id, seq, utcnow()) for spec in message.jobs],
        )
    if message.attachments:
        texts = {
            attachment.sha256: clean_text(attachment.text)
            for attachment in message.attachments
            if attachment.text is not None
            and connection.execute(TEXT_STORED, {"sha256": attachment.sha256}).first() is None
        }
        connection.execute(
            INSERT_ATTACHMENT,
            [
                {
                    "message_id": message_id,
                    "session_id": session_id,
                    "kind": attachment.kind,
                    "filename": clean_text(attachment.filename),
                    "mime_type": attachment.mime_type,
                    "size": attachment.size,
                    "sha256": attachment.sha256,
                    "path": attachment.path,
                    # Only the first of several copies in one message keeps it.
                    "text": texts.pop(attachment.sha256, None),
                    "duration_seconds": attachment.duration_seconds,
                    "created_at": created_at,
                }
                for attachment in message.attachments
            ],
        )
    row = None
    if not message.attachments and message.kind in CONVERSATION_KINDS:
        row = _row(message, seq, created_at, content, sender_name, stored_calls, stored_blocks)
    return StoredMessage(
        id=message_id,
        seq=seq,
        session_id=session_id,
        role=message.role,
        content=content,
        persona_id=message.persona_id,
        status=message.status,
        kind=message.kind,
        row=row,
    )


def ingest_key(lane: str | None, chat_id: str | None, platform_message_id: str | None) -> str | None:
    if lane is None or platform_message_id is None:
        return None
    return f"{lane}:{chat_id or ''}:{platform_message_id}"
