"""Pairing codes strangers get in a DM, and the strangers an admin approved (docs/access.md).

A stranger has one row per lane: a pending code until it expires or an admin approves it,
then a member for good. Pending rows are bounded per lane (the oldest go), so a flood of
strangers cannot grow the table without bound (`bot.turns.access` also bounds the rate).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection, Row
from sqlalchemy.engine import Engine as DatabaseEngine

from bot.storage.identities import LINK_CODE_ALPHABET
from bot.storage.models import as_utc, table_of, utcnow
from bot.storage.pairing_models import Pairing
from bot.storage.sanitise import clean_text

PAIRINGS = table_of(Pairing)
PAIRING_CODE_LENGTH = 6


@dataclass(frozen=True)
class PendingPairing:
    lane: str
    platform_user_id: str
    display_name: str
    code: str
    expires_at: datetime


class PairingStore:
    def __init__(self, database: DatabaseEngine) -> None:
        self.database = database

    def is_approved(self, accounts: list[tuple[str, str]]) -> bool:
        """Whether an admin approved any of these (lane, platform user id) accounts."""
        if not accounts:
            return False
        with self.database.connect() as connection:
            for lane, user_id in accounts:
                found = connection.execute(
                    select(PAIRINGS.c.id).where(
                        PAIRINGS.c.lane == lane,
                        PAIRINGS.c.platform_user_id == user_id,
                        PAIRINGS.c.approved_at.is_not(None),
                    )
                ).first()
                if found is not None:
                    return True
        return False

    def waiting_code(self, lane: str, user_id: str) -> PendingPairing | None:
        """The stranger's pending code while it is valid."""
        with self.database.connect() as connection:
            row = connection.execute(
                select(PAIRINGS).where(
                    PAIRINGS.c.lane == lane,
                    PAIRINGS.c.platform_user_id == user_id,
                    PAIRINGS.c.approved_at.is_(None),
                    PAIRINGS.c.expires_at > utcnow(),
                )
            ).first()
        return _pending(row) if row is not None else None

    def issue(
        self, lane: str, user_id: str, display_name: str, ttl: timedelta, pending_max: int
    ) -> PendingPairing:
        """A new code for the stranger (replacing an expired one); past `pending_max` waiting
        on the lane, the oldest are dropped."""
        now = utcnow()
        code = "".join(secrets.choice(LINK_CODE_ALPHABET) for _ in range(PAIRING_CODE_LENGTH))
        pending = PendingPairing(lane, user_id, clean_text(display_name)[:256], code, now + ttl)
        with self.database.begin() as connection:
            connection.execute(
                delete(PAIRINGS).where(
                    PAIRINGS.c.lane == lane,
                    PAIRINGS.c.platform_user_id == user_id,
                    PAIRINGS.c.approved_at.is_(None),
                )
            )
            connection.execute(
                PAIRINGS.insert().values(
                    lane=lane,
                    platform_user_id=user_id,
                    display_name=pending.display_name,
                    code=code,
                    created_at=now,
                    expires_at=pending.expires_at,
                )
            )
            self._drop_beyond(connection, lane, pending_max)
        return pending

    def _drop_beyond(self, connection: Connection, lane: str, keep: int) -> None:
        pending = (
            select(PAIRINGS.c.id)
            .where(PAIRINGS.c.lane == lane, PAIRINGS.c.approved_at.is_(None))
            .order_by(PAIRINGS.c.created_at.desc(), PAIRINGS.c.id.desc())
            .offset(keep)
        )
        connection.execute(delete(PAIRINGS).where(PAIRINGS.c.id.in_(pending.scalar_subquery())))

    def pending(self) -> list[PendingPairing]:
        """Codes waiting for approval, oldest first (expired ones are left out)."""
        with self.database.connect() as connection:
            rows = connection.execute(
                select(PAIRINGS)
                .where(PAIRINGS.c.approved_at.is_(None), PAIRINGS.c.expires_at > utcnow())
                .order_by(PAIRINGS.c.created_at)
            ).all()
        return [_pending(row) for row in rows]

    def approve(self, code: str) -> PendingPairing | None:
        """Approve the stranger holding `code`; None if no valid code matches."""
        normalised = code.strip().upper().replace("-", "").replace(" ", "")
        now = utcnow()
        with self.database.begin() as connection:
            row = connection.execute(
                select(PAIRINGS).where(PAIRINGS.c.code == normalised, PAIRINGS.c.approved_at.is_(None))
            ).first()
            if row is None or as_utc(row.expires_at) <= now:
                return None
            connection.execute(PAIRINGS.update().where(PAIRINGS.c.id == row.id).values(approved_at=now))
        return _pending(row)

    def delete_expired(self) -> int:
        with self.database.begin() as connection:
            result = connection.execute(
                delete(PAIRINGS).where(PAIRINGS.c.approved_at.is_(None), PAIRINGS.c.expires_at <= utcnow())
            )
        return int(result.rowcount or 0)


def _pending(row: Row[Any]) -> PendingPairing:
    return PendingPairing(
        row.lane,
        row.platform_user_id,
        row.display_name,
        row.code,
        as_utc(row.expires_at),
    )
