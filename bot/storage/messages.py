"""Messages and their attachments: the append-only transcript of every session.

`append` stores a message with everything that commits with it (see
`bot.storage.message_append`). The reads page through a session's rows: the window of
each turn (`recent_rows`), context maintenance, export, the console and the widget's
history; `bot.storage.message_rows` turns what they read into the transcript's rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, ScalarSelect, Select, and_, bindparam, case, func, literal, or_, update
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.storage.database import open_session
from bot.storage.jobs import JobSink
from bot.storage.message_append import DuplicateMessage, NewMessage, StoredMessage, ingest_key, write_message
from bot.storage.message_rows import (
    ATTACHMENT_COLUMNS,
    ATTACHMENTS,
    attachment_ref,
    decode_blocks,
    decode_calls,
    transcript_row,
)
from bot.storage.models import Attachment, ChatSession, Message, as_utc, table_of
from bot.storage.sanitise import clean_text
from transcript import AttachmentRef, BilledTokens, TranscriptRow
from transcript.kinds import CONVERSATION_KINDS, REPLY_KIND, TOOL_KINDS, MessageKind

MESSAGES = table_of(Message)
SESSIONS = table_of(ChatSession)
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
    MESSAGES.c.provider_blocks,
)
# The rows of the conversation (what the model sees), as opposed to stored events.
# One bound value per kind, not an expanding list: a list is expanded into the statement
# on every execution, a sixth of reading the window (it appears in four subqueries).
IS_CONVERSATION = MESSAGES.c.kind.in_([literal(kind) for kind in sorted(CONVERSATION_KINDS)])
# The statements of every turn are built once: SQLAlchemy then only binds values,
# which costs a fraction of building a statement per call.
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
# The stored result of one call: its call row's seq and the call's id, since some servers
# number each answer's calls afresh (`call_0`): the first result after that row with that
# id, before the turn's next call row.
_LATER_CALL = MESSAGES.alias("later_call")
RESULT_OF = (
    sa_select(MESSAGES.c.id)
    .where(
        MESSAGES.c.session_id == bindparam("session_id"),
        MESSAGES.c.kind == "tool_result",
        MESSAGES.c.tool_call_id == bindparam("call_id"),
        MESSAGES.c.seq > bindparam("call_seq"),
        ~sa_select(_LATER_CALL.c.id)
        .where(
            _LATER_CALL.c.session_id == MESSAGES.c.session_id,
            _LATER_CALL.c.kind == "tool_call",
            _LATER_CALL.c.seq > bindparam("call_seq"),
            _LATER_CALL.c.seq < MESSAGES.c.seq,
        )
        .exists(),
    )
    .order_by(MESSAGES.c.seq)
    .limit(1)
)
# Taken before looking for a call's result: of two processes storing one, the second sees the first's.
LOCK_SESSION = sa_select(SESSIONS.c.id).where(SESSIONS.c.id == bindparam("session_id")).with_for_update()


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
                return write_message(connection, session_id, message, self.jobs)
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
            return [write_message(connection, session_id, message, self.jobs) for message in messages]

    def append_result(self, session_id: str, call_seq: int, message: NewMessage) -> StoredMessage:
        """Store a call's result, or give back the one stored before: a call has one result.

        The call is the one made by the row at `call_seq` with id `message.tool_call_id`.
        Two processes that each finish the same call (one lost its conversation lock, the
        other resumed the turn) store one row between them: on PostgreSQL the session's
        row is locked before the look, so the second waits for the first and finds its row.
        """
        if message.kind != "tool_result" or message.tool_call_id is None:
            raise ValueError("only a call's result is stored once per call")
        values = {"session_id": session_id, "call_seq": call_seq, "call_id": message.tool_call_id}
        with self.database.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(LOCK_SESSION, {"session_id": session_id})
            found = connection.execute(RESULT_OF, values).scalar()
            if found is None:
                return write_message(connection, session_id, message, self.jobs)
        return self._stored(int(found))

    def result_of(self, session_id: str, call_seq: int, call_id: str) -> TranscriptRow | None:
        """The stored result of call `call_id` made by the row at `call_seq`; None while it has none."""
        with self.database.connect() as connection:
            found = connection.execute(
                RESULT_OF, {"session_id": session_id, "call_seq": call_seq, "call_id": call_id}
            ).scalar()
        return self._stored(int(found)).row if found is not None else None

    def _stored(self, message_id: int) -> StoredMessage:
        with self._session() as db:
            message = db.get(Message, message_id)
            if message is None or message.id is None:
                raise LookupError(f"message {message_id} is not stored")
            [row] = self._rows(db, [message])
        return StoredMessage(
            id=message.id,
            seq=row.seq,
            session_id=message.session_id,
            role=row.role,
            content=row.content,
            persona_id=row.persona_id,
            status=row.status,
            kind=row.kind,
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

    def last_reasoning_tokens(self, session_id: str) -> int:
        """The tokens the model thought before the session's latest reply (0: it did not think)."""
        with self._session() as db:
            answered = db.exec(
                select(Message.reply_to_id)
                .where(
                    Message.session_id == session_id,
                    Message.kind == REPLY_KIND,
                    Message.role == "assistant",
                )
                .order_by(col(Message.seq).desc())
            ).first()
            if answered is None:
                return 0
            total = db.exec(
                select(func.sum(Message.token_count)).where(
                    Message.session_id == session_id,
                    Message.kind == "reasoning",
                    Message.reply_to_id == answered,
                )
            ).one()
            return int(total or 0)

    def last_reply_model(self, session_id: str) -> str | None:
        """The model that answered the session's newest reply (None: none recorded)."""
        with self._session() as db:
            return db.exec(
                select(Message.model)
                .where(
                    Message.session_id == session_id,
                    Message.role == "assistant",
                    col(Message.model).is_not(None),
                )
                .order_by(col(Message.seq).desc())
                .limit(1)
            ).first()

    def last_turn_billed(self, session_id: str) -> BilledTokens | None:
        """The prompt tokens the server billed for the session's newest reply that reported them."""
        with self.database.connect() as connection:
            found = connection.execute(
                sa_select(MESSAGES.c.prompt_tokens, MESSAGES.c.cached_tokens, MESSAGES.c.cache_write_tokens)
                .where(
                    MESSAGES.c.session_id == session_id,
                    MESSAGES.c.role == "assistant",
                    MESSAGES.c.prompt_tokens.is_not(None),
                )
                .order_by(MESSAGES.c.seq.desc())
                .limit(1)
            ).first()
        if found is None:
            return None
        prompt, cached, written = found
        return BilledTokens(prompt, cached, written or 0)

    def billed_replies(self, session_id: str, from_seq: int = 1) -> dict[int, BilledTokens]:
        """The prompt tokens the server billed for each reply from `from_seq` on, by the reply's seq."""
        with self.database.connect() as connection:
            found = connection.execute(
                sa_select(
                    MESSAGES.c.seq,
                    MESSAGES.c.prompt_tokens,
                    MESSAGES.c.cached_tokens,
                    MESSAGES.c.cache_write_tokens,
                ).where(
                    MESSAGES.c.session_id == session_id,
                    MESSAGES.c.role == "assistant",
                    MESSAGES.c.seq >= from_seq,
                    MESSAGES.c.prompt_tokens.is_not(None),
                )
            ).all()
        return {seq: BilledTokens(prompt, cached, written or 0) for seq, prompt, cached, written in found}

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
                provider_blocks=decode_blocks(provider_blocks),
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
                provider_blocks,
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
