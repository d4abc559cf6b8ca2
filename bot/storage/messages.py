"""Messages and their attachments: the append-only transcript of every session.

`append` is the hottest write of a turn: one transaction bumps the session's sequence,
inserts the message, its full-text row, its attachments, its delivery state (a user
message that starts a turn) or the close of it (the reply), and the jobs it asks for.
The reads serve the window of each turn (`recent_rows`), context maintenance, export,
the console and the widget's history.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    ScalarSelect,
    Select,
    and_,
    bindparam,
    case,
    func,
    insert,
    literal,
    or_,
    update,
)
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Connection, Row
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.storage.database import open_session
from bot.storage.delivery_models import Delivery
from bot.storage.index_text import INDEX_MESSAGE, INDEX_MESSAGE_POSTGRES, message_index_text, owner_token
from bot.storage.jobs import JobRequest, JobSink, JobSpec
from bot.storage.models import Attachment, ChatSession, Message, as_utc, table_of, utcnow
from bot.storage.prepared import Prepared
from bot.storage.sanitise import clean_optional, clean_text
from transcript import AttachmentRef, StoredToolCall, TranscriptRow
from transcript.kinds import (
    CONVERSATION_KINDS,
    REPLY_KIND,
    SAID_KINDS,
    TOOL_KINDS,
    MessageKind,
    Role,
    Status,
    check_row,
    is_reply,
)
from transcript.rows import AttachmentKind

SESSIONS = table_of(ChatSession)
MESSAGES = table_of(Message)
ATTACHMENTS = table_of(Attachment)
DELIVERIES = table_of(Delivery)
ROW_COLUMNS = (
    MESSAGES.c.id,
    MESSAGES.c.seq,
    MESSAGES.c.role,
    MESSAGES.c.content,
    MESSAGES.c.persona_id,
    MESSAGES.c.sender_id,
    MESSAGES.c.sender_name,
    MESSAGES.c.status,
    MESSAGES.c.token_count,
    MESSAGES.c.attachment_count,
    MESSAGES.c.created_at,
    MESSAGES.c.kind,
    MESSAGES.c.tool_calls,
    MESSAGES.c.tool_call_id,
    MESSAGES.c.tool_name,
)
# The rows of the conversation (what the model sees), as opposed to stored events.
# One bound value per kind, not an expanding list: a list is expanded into the statement
# on every execution, a sixth of reading the window (it appears in four subqueries).
IS_CONVERSATION = MESSAGES.c.kind.in_([literal(kind) for kind in sorted(CONVERSATION_KINDS)])
# The statements of every turn are built once: SQLAlchemy then only binds values,
# which costs a fraction of building a statement per call. Those of `append`, the
# hottest write of a turn, run as prepared statements (`bot.storage.prepared`).
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
TEXT_STORED = (
    select(ATTACHMENTS.c.id)
    .where(ATTACHMENTS.c.sha256 == bindparam("sha256"), ATTACHMENTS.c.text.is_not(None))
    .limit(1)
)
STORED_TEXT = (
    select(ATTACHMENTS.c.text)
    .where(ATTACHMENTS.c.sha256 == bindparam("sha256"), ATTACHMENTS.c.text.is_not(None))
    .limit(1)
)
# The window reads whole units (a message, or a tool call with its results): the newest
# `limit` unit openers (any conversation row but a result) and every row after the oldest.
_IN_SESSION = (MESSAGES.c.session_id == bindparam("session_id"), MESSAGES.c.seq > bindparam("after_seq"))
_OPENS_UNIT = (*_IN_SESSION, IS_CONVERSATION, MESSAGES.c.kind != "tool_result")


def _nth_unit_seq(offset: ColumnElement[Any]) -> ScalarSelect[Any]:
    return (
        sa_select(MESSAGES.c.seq)
        .where(*_OPENS_UNIT)
        .order_by(MESSAGES.c.seq.desc())
        .limit(1)
        .offset(offset)
        .scalar_subquery()
    )


# A turn that called tools many times must not lose its question: the newest person's
# message is read too, when it is at most QUESTION_REACH units further back.
QUESTION_REACH = 32
_OLDEST_UNIT = _nth_unit_seq(bindparam("limit") - 1)
_REACH_UNIT = _nth_unit_seq(bindparam("limit") + QUESTION_REACH - 1)
_QUESTION = (
    sa_select(MESSAGES.c.seq)
    .where(*_IN_SESSION, MESSAGES.c.role == "user", MESSAGES.c.kind == REPLY_KIND)
    .order_by(MESSAGES.c.seq.desc())
    .limit(1)
    .scalar_subquery()
)
_FIRST_SEQ = case(
    (_OLDEST_UNIT.is_(None), 0),
    (and_(_QUESTION < _OLDEST_UNIT, or_(_REACH_UNIT.is_(None), _QUESTION >= _REACH_UNIT)), _QUESTION),
    else_=_OLDEST_UNIT,
)
RECENT_ROWS = (
    sa_select(*ROW_COLUMNS)
    .where(*_IN_SESSION, IS_CONVERSATION, MESSAGES.c.seq >= _FIRST_SEQ)
    .order_by(MESSAGES.c.seq)
)
ROWS_AFTER = sa_select(*ROW_COLUMNS).where(*_IN_SESSION, IS_CONVERSATION).order_by(MESSAGES.c.seq)


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
    )


def _row(
    message: NewMessage,
    seq: int,
    created_at: datetime,
    content: str,
    sender_name: str | None,
    stored_calls: str | None,
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
    )


class DuplicateMessage(Exception):
    """The platform message was already stored (idempotent ingestion)."""

    def __init__(self, existing: Message) -> None:
        super().__init__(f"message {existing.id} already stored")
        self.existing = existing


class MessageStore:
    """Reads and writes of messages and their attachments."""

    def __init__(self, database: DatabaseEngine, jobs: JobSink | None = None) -> None:
        self.database = database
        # Where the jobs a message asks for go (None: this store takes no such message).
        self.jobs = jobs

    def _session(self) -> Session:
        return open_session(self.database)

    def append(self, session_id: str, message: NewMessage) -> StoredMessage:
        """Append one message (and its attachments) with the next sequence number.

        The sequence bump, the message and its attachments commit together, so a
        failure never leaves a half-written message; on PostgreSQL the bump also
        row-locks the session, serialising appends across processes. A platform
        message that was already stored raises `DuplicateMessage` with the stored row.
        This is the hottest write of a turn, so it uses Core statements, not the ORM.
        """
        try:
            with self.database.begin() as connection:
                return self._write(connection, session_id, message)
        except IntegrityError:
            existing = self.find_platform_message(
                message.lane, message.platform_chat_id, message.platform_message_id
            )
            if existing is None or not message.live:
                raise
            raise DuplicateMessage(existing) from None

    def append_all(self, session_id: str, messages: Sequence[NewMessage]) -> list[StoredMessage]:
        """Append several messages in one transaction, in order: all of them are stored or none.

        For rows that belong together and come from no platform (a tool round's call and
        its first result), so no `DuplicateMessage` can arise.
        """
        if any(message.platform_message_id is not None for message in messages):
            raise ValueError("platform messages are appended one at a time")
        with self.database.begin() as connection:
            return [self._write(connection, session_id, message) for message in messages]

    def _write(self, connection: Connection, session_id: str, message: NewMessage) -> StoredMessage:
        """`append`'s writes, inside the caller's transaction."""
        created_at = message.created_at or utcnow()
        key = (
            ingest_key(message.lane, message.platform_chat_id, message.platform_message_id)
            if message.live
            else None
        )
        if message.jobs and self.jobs is None:
            raise ValueError("this store has no job queue for the jobs the message asks for")
        # A row no reader knows is refused here, before it is stored.
        check_row(message.kind, message.role, message.status)
        documents = sum(1 for attachment in message.attachments if attachment.kind == "document")
        content = clean_text(message.content)
        sender_name = clean_optional(message.sender_name)
        stored_calls = encode_calls(message.tool_calls)
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
        if message.jobs and self.jobs is not None:
            self.jobs.enqueue(
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
            row = _row(message, seq, created_at, content, sender_name, stored_calls)
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

    def find_platform_message(
        self, lane: str | None, chat_id: str | None, platform_message_id: str | None
    ) -> Message | None:
        key = ingest_key(lane, chat_id, platform_message_id)
        if key is None:
            return None
        with self._session() as db:
            return db.exec(select(Message).where(Message.ingest_key == key)).first()

    def reply_to(self, message_id: int) -> Message | None:
        """The persona's reply stored for a user message (see `is_reply`), if there is one."""
        with self._session() as db:
            return db.exec(
                select(Message)
                .where(
                    Message.reply_to_id == message_id,
                    Message.kind == REPLY_KIND,
                    Message.role == "assistant",
                )
                .order_by(col(Message.id).desc())
            ).first()

    def recent_rows(self, session_id: str, limit: int, after_seq: int = 0) -> list[TranscriptRow]:
        """The rows of the newest `limit` units after `after_seq` (no events), oldest first.

        A unit is a message or a tool call with its results, as the window counts them;
        the newest person's message is read too when a turn's own tool calls pushed it
        further back (up to `QUESTION_REACH` units). Read on every turn, so it costs one
        indexed query (two when some of the rows carry attachments), whatever the length
        of the history.
        """
        return self._conversation_rows(
            RECENT_ROWS, {"session_id": session_id, "after_seq": after_seq, "limit": limit}
        )

    def rows_after(self, session_id: str, after_seq: int) -> list[TranscriptRow]:
        """Every conversation row (no events) after `after_seq`, oldest first.

        A tool round reads only what was stored since its previous model call.
        """
        return self._conversation_rows(ROWS_AFTER, {"session_id": session_id, "after_seq": after_seq})

    def _conversation_rows(self, statement: Select[Any], values: dict[str, object]) -> list[TranscriptRow]:
        with self.database.connect() as connection:
            found = connection.execute(statement, values).all()
            with_files = [row.id for row in found if row.attachment_count]
            files: dict[int, list[AttachmentRef]] = {}
            if with_files:
                for attachment in connection.execute(
                    sa_select(*ATTACHMENT_COLUMNS)
                    .where(ATTACHMENTS.c.message_id.in_(with_files))
                    .order_by(ATTACHMENTS.c.id)
                ):
                    files.setdefault(attachment.message_id, []).append(attachment_ref(attachment))
        # Unpacked in `ROW_COLUMNS`' order: read on every turn, and a row's fields by name
        # cost several times as much as the tuple's.
        return [
            TranscriptRow(
                seq=seq,
                role=role,
                content=content,
                persona_id=persona_id,
                sender_id=sender_id,
                sender_name=sender_name,
                attachments=tuple(files.get(message_id, ())) if attachment_count else (),
                status=status,
                token_count=token_count,
                created_at=as_utc(created_at).isoformat(),
                kind=kind,
                tool_calls=decode_calls(tool_calls),
                tool_call_id=tool_call_id,
                tool_name=tool_name,
            )
            for (
                message_id,
                seq,
                role,
                content,
                persona_id,
                sender_id,
                sender_name,
                status,
                token_count,
                attachment_count,
                created_at,
                kind,
                tool_calls,
                tool_call_id,
                tool_name,
            ) in found
        ]

    def turn_rows(self, session_id: str, user_message_id: int) -> list[TranscriptRow]:
        """The tool calls and results a turn stored so far for the user message, oldest first."""
        with self._session() as db:
            messages = list(
                db.exec(
                    select(Message)
                    .where(
                        Message.session_id == session_id,
                        Message.reply_to_id == user_message_id,
                        col(Message.kind).in_(sorted(TOOL_KINDS)),
                    )
                    .order_by(col(Message.seq))
                )
            )
            return self._rows(db, messages)

    def latest_conversation_message(self, session_id: str) -> tuple[int, datetime] | None:
        """Seq and time of the session's newest conversation message (no `system` events)."""
        query = (
            sa_select(MESSAGES.c.seq, MESSAGES.c.created_at)
            .where(MESSAGES.c.session_id == session_id, IS_CONVERSATION)
            .order_by(MESSAGES.c.seq.desc())
            .limit(1)
        )
        with self.database.connect() as connection:
            found = connection.execute(query).first()
        return None if found is None else (found.seq, as_utc(found.created_at))

    def count_conversation(
        self, session_id: str, after_seq: int, before_seq: int, skip: Sequence[tuple[int, int]] = ()
    ) -> int:
        """Conversation messages with after_seq < seq < before_seq, outside the `skip` ranges."""
        query = (
            select(func.count())
            .select_from(MESSAGES)
            .where(
                MESSAGES.c.session_id == session_id,
                MESSAGES.c.seq > after_seq,
                MESSAGES.c.seq < before_seq,
                IS_CONVERSATION,
            )
        )
        for first, last in skip:
            query = query.where(~MESSAGES.c.seq.between(first, last))
        with self.database.connect() as connection:
            return int(connection.execute(query).scalar_one())

    def rows_between(self, session_id: str, first_seq: int, last_seq: int) -> list[TranscriptRow]:
        """Conversation rows with first_seq <= seq <= last_seq, oldest first."""
        with self._session() as db:
            messages = list(
                db.exec(
                    select(Message)
                    .where(
                        Message.session_id == session_id,
                        col(Message.kind).in_(sorted(CONVERSATION_KINDS)),
                        Message.seq >= first_seq,
                        Message.seq <= last_seq,
                    )
                    .order_by(col(Message.seq))
                )
            )
            return self._rows(db, messages)

    def messages(
        self, session_id: str, *, before_seq: int | None = None, limit: int | None = None
    ) -> list[Message]:
        """Stored messages (events included), oldest first; paged from the end."""
        with self._session() as db:
            query = select(Message).where(Message.session_id == session_id)
            if before_seq is not None:
                query = query.where(Message.seq < before_seq)
            query = query.order_by(col(Message.seq).desc())
            if limit is not None:
                query = query.limit(limit)
            found = list(db.exec(query))
            found.reverse()
            return found

    def messages_after(
        self, session_id: str, after_seq: int, kinds: Iterable[str], limit: int
    ) -> list[Message]:
        """Stored rows of `kinds` after `after_seq`, oldest first (what a session's push stream sends)."""
        with self._session() as db:
            query = (
                select(Message)
                .where(
                    Message.session_id == session_id,
                    Message.seq > after_seq,
                    col(Message.kind).in_(list(kinds)),
                )
                .order_by(col(Message.seq))
                .limit(limit)
            )
            return list(db.exec(query))

    def attachments_for(self, message_ids: Iterable[int]) -> dict[int, list[Row[Any]]]:
        """The attachments of these messages (with their shared document text), by message id."""
        ids = list(message_ids)
        if not ids:
            return {}
        grouped: dict[int, list[Row[Any]]] = {}
        with self.database.connect() as connection:
            for attachment in connection.execute(
                select(*ATTACHMENT_COLUMNS)
                .where(ATTACHMENTS.c.message_id.in_(ids))
                .order_by(ATTACHMENTS.c.id)
            ):
                grouped.setdefault(attachment.message_id, []).append(attachment)
        return grouped

    def session_documents(self, session_id: str) -> list[AttachmentRef]:
        """Every document shared in the session, oldest first."""
        with self.database.connect() as connection:
            return [
                attachment_ref(attachment)
                for attachment in connection.execute(
                    select(*ATTACHMENT_COLUMNS)
                    .where(ATTACHMENTS.c.session_id == session_id, ATTACHMENTS.c.kind == "document")
                    .order_by(ATTACHMENTS.c.id)
                )
            ]

    def stored_text(self, sha256: str) -> str | None:
        """The text (a document's, a voice note's transcript) stored for a file, if any copy has it."""
        with self.database.connect() as connection:
            return connection.execute(STORED_TEXT, {"sha256": sha256}).scalar_one_or_none()

    def unheard_recordings(self, limit: int) -> list[Row[Any]]:
        """Voice notes and audio no copy of which has a transcript: one row per file, oldest first."""
        heard = ATTACHMENTS.alias("heard")
        any_heard = (
            select(heard.c.id)
            .where(heard.c.sha256 == ATTACHMENTS.c.sha256, heard.c.text.is_not(None))
            .exists()
        )
        first_copy = (
            select(func.min(ATTACHMENTS.c.id))
            .where(ATTACHMENTS.c.kind.in_(("audio", "voice")), ~any_heard)
            .group_by(ATTACHMENTS.c.sha256)
            .scalar_subquery()
        )
        query = (
            select(ATTACHMENTS.c.id, ATTACHMENTS.c.sha256, ATTACHMENTS.c.path, ATTACHMENTS.c.filename)
            .where(ATTACHMENTS.c.id.in_(first_copy))
            .order_by(ATTACHMENTS.c.id)
            .limit(limit)
        )
        with self.database.connect() as connection:
            return list(connection.execute(query))

    def store_transcript(self, attachment_id: int, text: str) -> None:
        """A recording heard later (`chorus speech transcribe`): its transcript, on the copy asked for.

        Like a document's text, it is what the file says, not a change to a message: every copy
        of the file shows it from now on.
        """
        with self.database.begin() as connection:
            connection.execute(
                update(ATTACHMENTS)
                .where(ATTACHMENTS.c.id == attachment_id, ATTACHMENTS.c.text.is_(None))
                .values(text=clean_text(text))
            )

    def has_event(self, session_id: str, kind: MessageKind, prefix: str) -> bool:
        """Whether the session holds a stored event of `kind` whose text starts with `prefix`."""
        query = (
            sa_select(MESSAGES.c.id)
            .where(
                MESSAGES.c.session_id == session_id,
                MESSAGES.c.kind == kind,
                MESSAGES.c.content.startswith(prefix, autoescape=True),
            )
            .limit(1)
        )
        with self.database.connect() as connection:
            return connection.execute(query).first() is not None

    def get_message(self, message_id: int) -> Message | None:
        with self._session() as db:
            return db.get(Message, message_id)

    def get_attachment(self, attachment_id: int) -> Attachment | None:
        with self._session() as db:
            return db.get(Attachment, attachment_id)

    def _rows(self, db: Session, messages: Sequence[Message]) -> list[TranscriptRow]:
        ids = [message.id for message in messages if message.id is not None]
        grouped: dict[int, list[Row[Any]]] = {}
        if ids:
            for attachment in db.connection().execute(
                select(*ATTACHMENT_COLUMNS)
                .where(ATTACHMENTS.c.message_id.in_(ids))
                .order_by(ATTACHMENTS.c.id)
            ):
                grouped.setdefault(attachment.message_id, []).append(attachment)
        return [transcript_row(message, grouped.get(message.id or 0, [])) for message in messages]


def ingest_key(lane: str | None, chat_id: str | None, platform_message_id: str | None) -> str | None:
    if lane is None or platform_message_id is None:
        return None
    return f"{lane}:{chat_id or ''}:{platform_message_id}"


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
