"""Sessions and the routes to them: a person's active private session, a group chat's session.

A private chat talks in the session its person points at (`Person.active_session_id`), a
group chat (or one thread of it) in the session its `GroupRoute` points at; `/new` points the
route at a fresh session and the old one stays stored. Sessions are never deleted.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, Table, bindparam, delete, func, insert, update
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.storage.database import open_session
from bot.storage.models import (
    Account,
    ChatSession,
    GroupRoute,
    Message,
    Person,
    ReasoningSession,
    SpokenSession,
    new_id,
    table_of,
    utcnow,
)
from bot.storage.sanitise import clean_optional, clean_text

SESSIONS = table_of(ChatSession)
PERSONS = table_of(Person)
ACCOUNTS = table_of(Account)
SPOKEN = table_of(SpokenSession)
REASONING = table_of(ReasoningSession)

# Read on every message, so built once: SQLAlchemy then only binds values.
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


class SessionStore:
    """Reads and writes of sessions and of the routes (person, group chat) that point at them."""

    def __init__(self, database: DatabaseEngine) -> None:
        self.database = database

    def _session(self) -> Session:
        return open_session(self.database)

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

    def set_model_choice(self, session_id: str, choice: str | None) -> None:
        """/model: the `models:` entry this conversation speaks with; None goes back to the persona's."""
        self._update(session_id, model_choice=choice)

    def set_thinking(self, session_id: str, level: str | None) -> None:
        """/think: how hard the conversation's model thinks ("off", "low", "high")."""
        self._update(session_id, thinking=level)

    def _update(self, session_id: str, **values: object) -> None:
        with self._session() as db:
            db.execute(
                update(ChatSession)
                .where(col(ChatSession.id) == session_id)
                .values(**values, updated_at=utcnow())
            )
            db.commit()

    def is_spoken(self, session_id: str) -> bool:
        """Whether the session's replies are also spoken (`/voice on`)."""
        return self._has_flag(SPOKEN, session_id)

    def set_spoken(self, session_id: str, spoken: bool) -> None:
        """`/voice on` or `/voice off` for the session; setting what is set already changes nothing."""
        self._set_flag(SPOKEN, session_id, spoken)

    def shows_reasoning(self, session_id: str) -> bool:
        """Whether the session shows the model's thinking beside its replies (`/reasoning on`)."""
        return self._has_flag(REASONING, session_id)

    def set_shows_reasoning(self, session_id: str, shown: bool) -> None:
        """`/reasoning on` or `/reasoning off` for the session."""
        self._set_flag(REASONING, session_id, shown)

    def _has_flag(self, table: Table, session_id: str) -> bool:
        """A session preference kept as a row in `table` (no row: off)."""
        with self.database.connect() as connection:
            return connection.execute(_flag_row(table), {"session_id": session_id}).first() is not None

    def _set_flag(self, table: Table, session_id: str, on: bool) -> None:
        with self.database.begin() as connection:
            if not on:
                connection.execute(delete(table).where(table.c.session_id == session_id))
                return
            if connection.execute(_flag_row(table), {"session_id": session_id}).first() is None:
                try:
                    with connection.begin_nested():
                        connection.execute(insert(table).values(session_id=session_id, created_at=utcnow()))
                except IntegrityError:
                    pass  # another process turned it on at the same moment

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


def _flag_row(table: Table) -> Select[Any]:
    return sa_select(table.c.session_id).where(table.c.session_id == bindparam("session_id"))


def group_owner_id(lane: str, chat_id: str) -> str:
    """Memory of a group belongs to the whole chat, across its threads."""
    return f"{lane}:{chat_id}"
