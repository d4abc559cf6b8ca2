"""All reads and writes of conversations, identities and attachments.

Every other module goes through `Store`; no SQL lives anywhere else. The SQL is
plain SQLAlchemy Core/ORM that runs on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, delete, exists, func, insert, text, update
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine, Row
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.errors import LinkCodeError
from bot.storage.database import open_session
from bot.storage.delivery_models import Delivery
from bot.storage.index_text import message_index_text
from bot.storage.jobs import JobRequest, JobSink, JobSpec
from bot.storage.models import (
    Account,
    Attachment,
    ChatSession,
    GroupRoute,
    LinkCode,
    Message,
    Person,
    VisitorToken,
    table_of,
    utcnow,
)
from bot.storage.sanitise import clean_optional, clean_text
from transcript import AttachmentRef, TranscriptRow

if TYPE_CHECKING:
    from bot.storage.person_merge import PersonMerge

SESSIONS = table_of(ChatSession)
PERSONS = table_of(Person)
ACCOUNTS = table_of(Account)
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
)

# The full-text row of a message (SQLite; see migration 0003_memory).
INDEX_MESSAGE = text("INSERT INTO messages_fts(rowid, owner, content) VALUES (:id, :owner, :content)")
# The same index text on PostgreSQL, under a GIN index (see migration 0008_message_search); the
# owner is read from the session there, so a linked person's messages need no re-tagging.
INDEX_MESSAGE_POSTGRES = text("INSERT INTO messages_fts (message_id, search_text) VALUES (:id, :content)")
# The index keeps no copy of the text: a row is removed by repeating exactly what was written.
UNINDEX_MESSAGE = text(
    "INSERT INTO messages_fts(messages_fts, rowid, owner, content) VALUES ('delete', :id, :owner, :content)"
)

# The statements of every turn are built once: SQLAlchemy then only binds values,
# which costs a fraction of building a statement per call.
BUMP_SEQUENCE = (
    update(SESSIONS)
    .where(SESSIONS.c.id == bindparam("target_session"))
    .values(
        last_seq=SESSIONS.c.last_seq + 1,
        document_count=SESSIONS.c.document_count + bindparam("new_documents"),
        updated_at=bindparam("touched_at"),
    )
    .returning(SESSIONS.c.last_seq, SESSIONS.c.owner_kind, SESSIONS.c.owner_id)
)
INSERT_MESSAGE = insert(MESSAGES).returning(MESSAGES.c.id)
INSERT_ATTACHMENT = insert(ATTACHMENTS)
INSERT_DELIVERY = insert(DELIVERIES)
CLOSE_DELIVERY = (
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
RECENT_ROWS = (
    sa_select(*ROW_COLUMNS)
    .where(
        MESSAGES.c.session_id == bindparam("session_id"),
        MESSAGES.c.seq > bindparam("after_seq"),
        MESSAGES.c.role != "system",
    )
    .order_by(MESSAGES.c.seq.desc())
    .limit(bindparam("limit"))
)
ACCOUNT_BY_PLATFORM_ID = sa_select(ACCOUNTS).where(
    ACCOUNTS.c.lane == bindparam("lane"), ACCOUNTS.c.platform_user_id == bindparam("platform_user_id")
)
ACTIVE_PRIVATE_SESSION = (
    sa_select(SESSIONS)
    .join(PERSONS, PERSONS.c.active_session_id == SESSIONS.c.id)
    .where(PERSONS.c.id == bindparam("person_id"))
)
SESSION_BY_ID = sa_select(SESSIONS).where(SESSIONS.c.id == bindparam("session_id"))
# A known sender's account and active private session in one read (the common case).
KNOWN_PRIVATE_ROUTE = (
    select(
        *(column.label(f"account_{column.name}") for column in ACCOUNTS.c),
        *(column.label(f"session_{column.name}") for column in SESSIONS.c),
    )
    .select_from(ACCOUNTS)
    .join(PERSONS, PERSONS.c.id == ACCOUNTS.c.person_id)
    .join(SESSIONS, SESSIONS.c.id == PERSONS.c.active_session_id)
    .where(ACCOUNTS.c.lane == bindparam("lane"), ACCOUNTS.c.platform_user_id == bindparam("platform_user_id"))
)

VISITOR_TOKENS = table_of(VisitorToken)
LINK_CODES = table_of(LinkCode)
# A web visitor's token → its account and active private session, in one read (every request).
VISITOR_ROUTE = (
    select(
        VISITOR_TOKENS.c.visitor_id,
        *(column.label(f"account_{column.name}") for column in ACCOUNTS.c),
        *(column.label(f"session_{column.name}") for column in SESSIONS.c),
    )
    .select_from(VISITOR_TOKENS)
    .outerjoin(
        ACCOUNTS, (ACCOUNTS.c.lane == "web") & (ACCOUNTS.c.platform_user_id == VISITOR_TOKENS.c.visitor_id)
    )
    .outerjoin(PERSONS, PERSONS.c.id == ACCOUNTS.c.person_id)
    .outerjoin(SESSIONS, SESSIONS.c.id == PERSONS.c.active_session_id)
    .where(VISITOR_TOKENS.c.token_hash == bindparam("token_hash"))
)
# Web visitors past the cutoff whose person never stored a message anywhere and has
# no account besides the visitor's own (a linked person is someone's real history).
_OTHER_ACCOUNTS = ACCOUNTS.alias("other_accounts")
IDLE_VISITORS = (
    select(VISITOR_TOKENS.c.visitor_id, ACCOUNTS.c.person_id)
    .select_from(VISITOR_TOKENS)
    .outerjoin(
        ACCOUNTS, (ACCOUNTS.c.lane == "web") & (ACCOUNTS.c.platform_user_id == VISITOR_TOKENS.c.visitor_id)
    )
    .where(
        VISITOR_TOKENS.c.created_at < bindparam("cutoff"),
        ~exists().where(
            SESSIONS.c.owner_kind == "person",
            SESSIONS.c.owner_id == ACCOUNTS.c.person_id,
            SESSIONS.c.last_seq > 0,
        ),
        ~exists().where(
            _OTHER_ACCOUNTS.c.person_id == ACCOUNTS.c.person_id, _OTHER_ACCOUNTS.c.id != ACCOUNTS.c.id
        ),
    )
    .limit(bindparam("batch"))
)

# Link codes avoid look-alike characters so they survive being read aloud or retyped.
LINK_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
LINK_CODE_LENGTH = 8


def new_id() -> str:
    return uuid.uuid4().hex


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

    role: str
    content: str
    token_count: int
    persona_id: str | None = None
    sender_id: str | None = None
    sender_name: str | None = None
    lane: str | None = None
    platform_chat_id: str | None = None
    platform_message_id: str | None = None
    reply_to_id: int | None = None
    status: str = "complete"
    created_at: datetime | None = None
    attachments: tuple[NewAttachment, ...] = ()
    # False for imported copies: they keep their platform ids but no idempotency key.
    live: bool = True
    # Set on a user message that starts a turn: its delivery state is stored with it.
    delivery: DeliveryTarget | None = None
    # Jobs to run after this message, enqueued in the transaction that stores it.
    jobs: tuple[JobSpec, ...] = ()


@dataclass(frozen=True)
class StoredMessage:
    """What `append` hands back: the new row's identity and what callers read of it."""

    id: int
    seq: int
    session_id: str
    role: str
    content: str
    persona_id: str | None
    status: str


class DuplicateMessage(Exception):
    """The platform message was already stored (idempotent ingestion)."""

    def __init__(self, existing: Message) -> None:
        super().__init__(f"message {existing.id} already stored")
        self.existing = existing


class Store:
    """The storage boundary of Chorus."""

    def __init__(self, database: Engine, jobs: JobSink | None = None) -> None:
        self.database = database
        # Where the jobs a message asks for go (None: this store takes no such message).
        self.jobs = jobs

    def _session(self) -> Session:
        return open_session(self.database)

    # --- identity and routing ------------------------------------------------

    def account(self, lane: str, platform_user_id: str, display_name: str, username: str | None) -> Account:
        """The account for this platform user, created with a new person if unseen."""
        display_name, username = clean_text(display_name), clean_optional(username)
        # Every message looks its sender up: the common case (known, unchanged) is one Core read.
        with self.database.connect() as connection:
            known = connection.execute(
                ACCOUNT_BY_PLATFORM_ID, {"lane": lane, "platform_user_id": platform_user_id}
            ).first()
        if known is not None and (known.display_name, known.username) == (display_name, username):
            return Account(**known._mapping)
        with self._session() as db:
            found = db.exec(
                select(Account).where(Account.lane == lane, Account.platform_user_id == platform_user_id)
            ).first()
            if found is not None:
                if found.display_name != display_name or found.username != username:
                    found.display_name, found.username = display_name, username
                    db.add(found)
                    db.commit()
                return found
            person = Person(id=new_id())
            account = Account(
                lane=lane,
                platform_user_id=platform_user_id,
                person_id=person.id,
                display_name=display_name,
                username=username,
            )
            db.add(person)
            db.add(account)
            try:
                db.commit()
            except IntegrityError:
                # Another process created it first; theirs wins.
                db.rollback()
                return self.account(lane, platform_user_id, display_name, username)
            return account

    def known_private_route(
        self, lane: str, platform_user_id: str, display_name: str, username: str | None
    ) -> tuple[Account, ChatSession] | None:
        """The account and active private session of a known, unrenamed sender; else None."""
        display_name, username = clean_text(display_name), clean_optional(username)
        with self.database.connect() as connection:
            row = connection.execute(
                KNOWN_PRIVATE_ROUTE, {"lane": lane, "platform_user_id": platform_user_id}
            ).first()
        if row is None or (row.account_display_name, row.account_username) != (display_name, username):
            return None
        fields = row._mapping
        account = Account(**{column.name: fields[f"account_{column.name}"] for column in ACCOUNTS.c})
        session = ChatSession(**{column.name: fields[f"session_{column.name}"] for column in SESSIONS.c})
        return account, session

    def private_session(self, person_id: str, default_persona: str) -> ChatSession:
        """The person's active private session, created on first use."""
        with self.database.connect() as connection:
            active = connection.execute(ACTIVE_PRIVATE_SESSION, {"person_id": person_id}).first()
        if active is not None:
            return ChatSession(**active._mapping)
        with self._session() as db:
            person = db.get(Person, person_id)
            if person is None:
                raise LookupError(f"no person {person_id}")
            if person.active_session_id:
                found = db.get(ChatSession, person.active_session_id)
                if found is not None:
                    return found
            chat = ChatSession(
                id=new_id(),
                kind="private",
                owner_kind="person",
                owner_id=person_id,
                persona_id=default_persona,
            )
            db.add(chat)
            # Only claim the slot if nobody else did meanwhile (several processes).
            claimed = db.execute(
                update(Person)
                .where(col(Person.id) == person_id)
                .where(col(Person.active_session_id).is_(person.active_session_id))
                .values(active_session_id=chat.id)
            )
            if claimed.rowcount == 0:  # type: ignore[attr-defined]
                db.rollback()
                return self.private_session(person_id, default_persona)
            db.commit()
            return chat

    def group_session(
        self, lane: str, chat_id: str, thread_id: str | None, default_persona: str
    ) -> ChatSession:
        """The session of a group chat (or one thread of it), created on first use."""
        thread = thread_id or ""
        with self._session() as db:
            route = db.exec(
                select(GroupRoute).where(
                    GroupRoute.lane == lane,
                    GroupRoute.chat_id == chat_id,
                    GroupRoute.thread_id == thread,
                )
            ).first()
            if route is not None:
                found = db.get(ChatSession, route.session_id)
                if found is not None:
                    return found
            chat = ChatSession(
                id=new_id(),
                kind="group",
                owner_kind="group",
                owner_id=group_owner_id(lane, chat_id),
                persona_id=default_persona,
            )
            db.add(chat)
            if route is None:
                db.add(GroupRoute(lane=lane, chat_id=chat_id, thread_id=thread, session_id=chat.id))
            else:
                route.session_id = chat.id
                db.add(route)
            try:
                db.commit()
            except IntegrityError:
                db.rollback()
                return self.group_session(lane, chat_id, thread_id, default_persona)
            return chat

    def start_new_session(
        self, current: ChatSession, lane: str, chat_id: str, thread_id: str | None
    ) -> ChatSession:
        """Point the route of `current` at a fresh session; the old one stays stored."""
        with self._session() as db:
            chat = ChatSession(
                id=new_id(),
                kind=current.kind,
                owner_kind=current.owner_kind,
                owner_id=current.owner_id,
                persona_id=current.persona_id,
            )
            db.add(chat)
            if current.owner_kind == "person":
                db.execute(
                    update(Person).where(col(Person.id) == current.owner_id).values(active_session_id=chat.id)
                )
            else:
                db.execute(
                    update(GroupRoute)
                    .where(
                        col(GroupRoute.lane) == lane,
                        col(GroupRoute.chat_id) == chat_id,
                        col(GroupRoute.thread_id) == (thread_id or ""),
                    )
                    .values(session_id=chat.id)
                )
            db.commit()
            return chat

    def create_link_code(self, person_id: str, ttl: timedelta) -> LinkCode:
        code = "".join(secrets.choice(LINK_CODE_ALPHABET) for _ in range(LINK_CODE_LENGTH))
        now = utcnow()
        link = LinkCode(code=code, person_id=person_id, created_at=now, expires_at=now + ttl)
        with self._session() as db:
            db.add(link)
            db.commit()
        return link

    def redeem_link_code(self, code: str, account: Account, *, dedup_threshold: float) -> PersonMerge:
        """Join `account`'s person to the person who created `code`; single use, expires.

        Everything of the account's person moves over (see `person_merge`); memory items at
        least `dedup_threshold` similar to one the code's person has are kept once.
        """
        # person_merge builds on this module's index statements, so it is imported here.
        from bot.storage.person_merge import merge_persons

        normalised = code.strip().upper().replace("-", "").replace(" ", "")
        with self._session() as db:
            link = db.get(LinkCode, normalised)
            now = utcnow()
            if link is None:
                raise LinkCodeError("That link code is not valid. Check it and try again.")
            if link.used_at is not None:
                raise LinkCodeError("That link code was already used. Ask for a new one with /link.")
            if _aware(link.expires_at) < now:
                raise LinkCodeError("That link code has expired. Ask for a new one with /link.")
            if link.person_id == account.person_id:
                raise LinkCodeError("This account is already linked to that person.")
            claimed = db.execute(
                update(LinkCode)
                .where(col(LinkCode.code) == normalised, col(LinkCode.used_at).is_(None))
                .values(used_at=now)
            )
            if claimed.rowcount == 0:  # type: ignore[attr-defined]
                raise LinkCodeError("That link code was already used. Ask for a new one with /link.")
            merge = merge_persons(db, account.person_id, link.person_id, dedup_threshold)
            db.commit()
            return merge

    def unlink(self, account: Account) -> Person | None:
        """Detach `account` into a person of its own; None if it is the only account."""
        with self._session() as db:
            siblings = db.exec(
                select(func.count()).select_from(Account).where(Account.person_id == account.person_id)
            ).one()
            if siblings <= 1:
                return None
            person = Person(id=new_id())
            db.add(person)
            db.execute(update(Account).where(col(Account.id) == account.id).values(person_id=person.id))
            db.commit()
            return person

    def find_account(self, lane: str, platform_user_id: str) -> Account | None:
        """The account of a platform user, without creating or renaming it."""
        with self._session() as db:
            return db.exec(
                select(Account).where(Account.lane == lane, Account.platform_user_id == platform_user_id)
            ).first()

    def accounts_of(self, person_id: str) -> list[Account]:
        with self._session() as db:
            return list(
                db.exec(select(Account).where(Account.person_id == person_id).order_by(col(Account.id)))
            )

    def create_visitor(self) -> tuple[str, str]:
        """A new anonymous web visitor: (bearer token, visitor id). Only the hash is kept."""
        token = secrets.token_urlsafe(32)
        visitor_id = new_id()
        with self._session() as db:
            db.add(VisitorToken(token_hash=_token_hash(token), visitor_id=visitor_id))
            db.commit()
        return token, visitor_id

    def visitor_for_token(self, token: str) -> str | None:
        with self._session() as db:
            found = db.get(VisitorToken, _token_hash(token))
            return found.visitor_id if found is not None else None

    def visitor_route(self, token: str) -> tuple[str, tuple[Account, ChatSession] | None] | None:
        """The visitor of a token, with its account and active session when both exist; None if unknown."""
        with self.database.connect() as connection:
            row = connection.execute(VISITOR_ROUTE, {"token_hash": _token_hash(token)}).first()
        if row is None:
            return None
        fields = row._mapping
        if fields["account_id"] is None or fields["session_id"] is None:
            return row.visitor_id, None
        account = Account(**{column.name: fields[f"account_{column.name}"] for column in ACCOUNTS.c})
        session = ChatSession(**{column.name: fields[f"session_{column.name}"] for column in SESSIONS.c})
        return row.visitor_id, (account, session)

    def forget_idle_visitors(self, idle: timedelta, batch: int = 500) -> int:
        """Delete web visitors created longer than `idle` ago that never stored a message.

        A visitor is its token, its web account, that account's person and the
        person's empty sessions; one linked to another account is kept.
        """
        cutoff = utcnow() - idle
        forgotten = 0
        while True:
            with self.database.begin() as connection:
                found = connection.execute(IDLE_VISITORS, {"cutoff": cutoff, "batch": batch}).all()
                if not found:
                    return forgotten
                visitor_ids = [row.visitor_id for row in found]
                person_ids = [row.person_id for row in found if row.person_id is not None]
                connection.execute(delete(VISITOR_TOKENS).where(VISITOR_TOKENS.c.visitor_id.in_(visitor_ids)))
                connection.execute(
                    delete(ACCOUNTS).where(
                        ACCOUNTS.c.lane == "web", ACCOUNTS.c.platform_user_id.in_(visitor_ids)
                    )
                )
                connection.execute(
                    delete(SESSIONS).where(
                        SESSIONS.c.owner_kind == "person", SESSIONS.c.owner_id.in_(person_ids)
                    )
                )
                connection.execute(delete(PERSONS).where(PERSONS.c.id.in_(person_ids)))
            forgotten += len(found)

    def delete_expired_link_codes(self) -> int:
        with self.database.begin() as connection:
            result = connection.execute(delete(LINK_CODES).where(LINK_CODES.c.expires_at < utcnow()))
        return int(result.rowcount or 0)

    # --- sessions ------------------------------------------------------------

    def get_session(self, session_id: str) -> ChatSession | None:
        with self.database.connect() as connection:
            found = connection.execute(SESSION_BY_ID, {"session_id": session_id}).first()
        return ChatSession(**found._mapping) if found is not None else None

    def refresh(self, session: ChatSession) -> ChatSession:
        """The session as stored now (a turn or command may have changed it meanwhile)."""
        found = self.get_session(session.id)
        if found is None:
            # Sessions are never deleted; a missing row means the database was swapped underneath.
            raise LookupError(f"session {session.id} is no longer stored")
        return found

    def find_session(self, prefix: str) -> ChatSession | None:
        """A session by id or unambiguous id prefix (as typed on a command line)."""
        with self._session() as db:
            matches = list(
                db.exec(select(ChatSession).where(col(ChatSession.id).startswith(prefix)).limit(2))
            )
            return matches[0] if len(matches) == 1 else None

    def list_sessions(self) -> list[tuple[ChatSession, int]]:
        """Every session with its message count, newest activity first."""
        with self._session() as db:
            counts = (
                select(Message.session_id, func.count().label("n"))
                .group_by(col(Message.session_id))
                .subquery()
            )
            rows = db.exec(
                select(ChatSession, func.coalesce(counts.c.n, 0))
                .outerjoin(counts, counts.c.session_id == ChatSession.id)
                .order_by(col(ChatSession.updated_at).desc())
            ).all()
            return [(chat, int(count)) for chat, count in rows]

    def set_persona(self, session_id: str, persona_id: str) -> None:
        with self._session() as db:
            db.execute(
                update(ChatSession)
                .where(col(ChatSession.id) == session_id)
                .values(persona_id=persona_id, updated_at=utcnow())
            )
            db.commit()

    def create_session(
        self, kind: str, owner_kind: str, owner_id: str, persona_id: str | None, title: str = ""
    ) -> ChatSession:
        """A session that no route points at (used by import)."""
        chat = ChatSession(
            id=new_id(),
            kind=kind,
            owner_kind=owner_kind,
            owner_id=owner_id,
            persona_id=persona_id,
            title=clean_text(title),
        )
        with self._session() as db:
            db.add(chat)
            db.commit()
        return chat

    # --- messages --------------------------------------------------------------

    def append(self, session_id: str, message: NewMessage) -> StoredMessage:
        """Append one message (and its attachments) with the next sequence number.

        The sequence bump, the message and its attachments commit together, so a
        failure never leaves a half-written message; on PostgreSQL the bump also
        row-locks the session, serialising appends across processes. A platform
        message that was already stored raises `DuplicateMessage` with the stored row.
        This is the hottest write of a turn, so it uses Core statements, not the ORM.
        """
        created_at = message.created_at or utcnow()
        key = (
            ingest_key(message.lane, message.platform_chat_id, message.platform_message_id)
            if message.live
            else None
        )
        if message.jobs and self.jobs is None:
            raise ValueError("this store has no job queue for the jobs the message asks for")
        documents = sum(1 for attachment in message.attachments if attachment.kind == "document")
        content = clean_text(message.content)
        sender_name = clean_optional(message.sender_name)
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
        }
        try:
            with self.database.begin() as connection:
                seq, owner_kind, owner_id = connection.execute(
                    BUMP_SEQUENCE,
                    {"target_session": session_id, "new_documents": documents, "touched_at": created_at},
                ).one()
                message_id = connection.execute(INSERT_MESSAGE, {"seq": seq, **values}).scalar_one()
                if message.role != "system":
                    index_row = {
                        "id": message_id,
                        "owner": owner_token(owner_kind, owner_id),
                        "content": message_index_text(sender_name, content, created_at),
                    }
                    if connection.dialect.name == "sqlite":
                        connection.execute(INDEX_MESSAGE, index_row)
                    else:
                        del index_row["owner"]
                        connection.execute(INDEX_MESSAGE_POSTGRES, index_row)
                if message.delivery is not None and key is not None:
                    connection.execute(
                        INSERT_DELIVERY,
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
                elif message.role == "assistant" and message.reply_to_id is not None:
                    # The reply and the end of its turn's open state commit together.
                    connection.execute(
                        CLOSE_DELIVERY, {"answered_message": message.reply_to_id, "touched_at": created_at}
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
                                "created_at": created_at,
                            }
                            for attachment in message.attachments
                        ],
                    )
        except IntegrityError:
            existing = self.find_platform_message(
                message.lane, message.platform_chat_id, message.platform_message_id
            )
            if existing is None or not message.live:
                raise
            raise DuplicateMessage(existing) from None
        return StoredMessage(
            id=message_id,
            seq=seq,
            session_id=session_id,
            role=message.role,
            content=content,
            persona_id=message.persona_id,
            status=message.status,
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
        """The assistant reply stored for a user message, if there is one."""
        with self._session() as db:
            return db.exec(
                select(Message)
                .where(Message.reply_to_id == message_id, Message.role == "assistant")
                .order_by(col(Message.id).desc())
            ).first()

    def recent_rows(self, session_id: str, limit: int, after_seq: int = 0) -> list[TranscriptRow]:
        """The newest `limit` conversation rows after `after_seq` (no `system` events), oldest first.

        Read on every turn, so it costs one indexed query (two when some of the
        rows carry attachments), whatever the length of the history.
        """
        with self.database.connect() as connection:
            newest_first = connection.execute(
                RECENT_ROWS, {"session_id": session_id, "after_seq": after_seq, "limit": limit}
            ).all()
            found = list(reversed(newest_first))
            with_files = [row.id for row in found if row.attachment_count]
            files: dict[int, list[AttachmentRef]] = {}
            if with_files:
                for attachment in connection.execute(
                    sa_select(*ATTACHMENT_COLUMNS)
                    .where(ATTACHMENTS.c.message_id.in_(with_files))
                    .order_by(ATTACHMENTS.c.id)
                ):
                    files.setdefault(attachment.message_id, []).append(attachment_ref(attachment))
        return [
            TranscriptRow(
                seq=row.seq,
                role=row.role,
                content=row.content,
                persona_id=row.persona_id,
                sender_id=row.sender_id,
                sender_name=row.sender_name,
                attachments=tuple(files.get(row.id, ())),
                status=row.status,
                token_count=row.token_count,
                created_at=_aware(row.created_at).isoformat(),
            )
            for row in found
        ]

    def latest_conversation_message(self, session_id: str) -> tuple[int, datetime] | None:
        """Seq and time of the session's newest conversation message (no `system` events)."""
        query = (
            sa_select(MESSAGES.c.seq, MESSAGES.c.created_at)
            .where(MESSAGES.c.session_id == session_id, MESSAGES.c.role != "system")
            .order_by(MESSAGES.c.seq.desc())
            .limit(1)
        )
        with self.database.connect() as connection:
            found = connection.execute(query).first()
        return None if found is None else (found.seq, _aware(found.created_at))

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
                MESSAGES.c.role != "system",
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
                        Message.role != "system",
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


def owner_token(owner_kind: str, owner_id: str) -> str:
    """One index token naming a memory owner: the hex of "kind:id" (as the migration's SQL builds it)."""
    return f"{owner_kind}:{owner_id}".encode().hex().upper()


def _token_hash(token: str) -> str:
    # Tokens are 256 random bits, so a plain SHA-256 is enough to make a leaked table useless.
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def ingest_key(lane: str | None, chat_id: str | None, platform_message_id: str | None) -> str | None:
    if lane is None or platform_message_id is None:
        return None
    return f"{lane}:{chat_id or ''}:{platform_message_id}"


def group_owner_id(lane: str, chat_id: str) -> str:
    """Memory of a group belongs to the whole chat, across its threads."""
    return f"{lane}:{chat_id}"


def transcript_row(message: Message, attachments: Sequence[Attachment | Row[Any]]) -> TranscriptRow:
    return TranscriptRow(
        seq=message.seq,
        role=message.role,
        content=message.content,
        persona_id=message.persona_id,
        sender_id=message.sender_id,
        sender_name=message.sender_name,
        attachments=tuple(attachment_ref(attachment) for attachment in attachments),
        status=message.status,
        token_count=message.token_count,
        created_at=_aware(message.created_at).isoformat(),
    )


def attachment_ref(attachment: Attachment | Row[Any]) -> AttachmentRef:
    return AttachmentRef(
        kind="image" if attachment.kind == "image" else "document",
        filename=attachment.filename,
        mime_type=attachment.mime_type,
        size=attachment.size,
        sha256=attachment.sha256,
        text=attachment.text,
    )


def _aware(moment: datetime) -> datetime:
    # SQLite hands datetimes back without an offset; they were stored as UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
