"""Persons, their platform accounts, and the link codes that join accounts into one person.

Every sender is an account (lane + platform user id) of a person, created on first sight.
`/link` shows a one-time code; redeeming it on another account joins that account's
person to the code's person (`person_merge`); `/unlink` detaches an account again.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from sqlalchemy import bindparam, delete, func, update
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from bot.errors import LinkCodeError
from bot.storage.database import open_session
from bot.storage.models import Account, LinkCode, Person, as_utc, new_id, table_of, utcnow
from bot.storage.person_merge import PersonMerge, merge_persons
from bot.storage.sanitise import clean_optional, clean_text

ACCOUNTS = table_of(Account)
LINK_CODES = table_of(LinkCode)
# Every message looks its sender up: built once, SQLAlchemy then only binds values.
ACCOUNT_BY_PLATFORM_ID = sa_select(ACCOUNTS).where(
    ACCOUNTS.c.lane == bindparam("lane"), ACCOUNTS.c.platform_user_id == bindparam("platform_user_id")
)

# Link codes avoid look-alike characters so they survive being read aloud or retyped.
LINK_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
LINK_CODE_LENGTH = 8


class IdentityStore:
    """Reads and writes of persons, accounts and link codes."""

    def __init__(self, database: DatabaseEngine) -> None:
        self.database = database

    def _session(self) -> Session:
        return open_session(self.database)

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
        normalised = code.strip().upper().replace("-", "").replace(" ", "")
        with self._session() as db:
            link = db.get(LinkCode, normalised)
            now = utcnow()
            if link is None:
                raise LinkCodeError("That link code is not valid. Check it and try again.")
            if link.used_at is not None:
                raise LinkCodeError("That link code was already used. Ask for a new one with /link.")
            if as_utc(link.expires_at) < now:
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

    def delete_expired_link_codes(self) -> int:
        with self.database.begin() as connection:
            result = connection.execute(delete(LINK_CODES).where(LINK_CODES.c.expires_at < utcnow()))
        return int(result.rowcount or 0)
