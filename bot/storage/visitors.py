"""Anonymous web visitors: a bearer token (only its hash is stored) naming a visitor id.

A visitor talks as the web account whose platform user id is the visitor id; a visitor who
never wrote anything is forgotten after a while, unless their person was linked to another
account (then it is someone's real history).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from sqlalchemy import bindparam, delete, exists, select
from sqlalchemy.engine import Engine as DatabaseEngine

from bot.storage.database import open_session
from bot.storage.models import Account, ChatSession, Person, VisitorToken, new_id, table_of, utcnow

SESSIONS = table_of(ChatSession)
PERSONS = table_of(Person)
ACCOUNTS = table_of(Account)
VISITOR_TOKENS = table_of(VisitorToken)
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


class VisitorStore:
    """Reads and writes of web visitor tokens."""

    def __init__(self, database: DatabaseEngine) -> None:
        self.database = database

    def create_visitor(self) -> tuple[str, str]:
        """A new anonymous web visitor: (bearer token, visitor id). Only the hash is kept."""
        token = secrets.token_urlsafe(32)
        visitor_id = new_id()
        with open_session(self.database) as db:
            db.add(VisitorToken(token_hash=_token_hash(token), visitor_id=visitor_id))
            db.commit()
        return token, visitor_id

    def visitor_for_token(self, token: str) -> str | None:
        with open_session(self.database) as db:
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


def _token_hash(token: str) -> str:
    # Tokens are 256 random bits, so a plain SHA-256 is enough to make a leaked table useless.
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
