"""Reads and writes of each turn's delivery state (see `Delivery`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.engine import Engine as DatabaseEngine

from bot.storage.delivery_models import Delivery
from bot.storage.models import table_of, utcnow

DELIVERIES = table_of(Delivery)

SET_DRAFT = (
    update(DELIVERIES)
    .where(DELIVERIES.c.ingest_key == bindparam("key"))
    .values(draft_id=bindparam("draft"), updated_at=bindparam("touched_at"))
)
# A turn whose reply the lane showed in full leaves nothing to repair: its row goes.
DROP_DELIVERED = delete(DELIVERIES).where(
    DELIVERIES.c.ingest_key == bindparam("key"), DELIVERIES.c.state == "replied"
)


class DeliveryStore:
    def __init__(self, database: DatabaseEngine) -> None:
        self.database = database

    def note_draft(self, key: str, draft_id: str) -> None:
        """The lane shows the reply in this platform message: a restart can finish it there."""
        with self.database.begin() as connection:
            connection.execute(SET_DRAFT, {"key": key, "draft": draft_id, "touched_at": utcnow()})

    def delivered(self, key: str) -> None:
        """The lane showed the stored reply in full: the turn's delivery state is dropped.

        Its reply is stored, so a re-delivered copy of the message is still answered
        once (`Store.reply_to`); only turns that can still be repaired keep a row.
        """
        with self.database.begin() as connection:
            connection.execute(DROP_DELIVERED, {"key": key})

    def unfinished(self, since: datetime, lanes: Iterable[str], exclude_owner: str) -> list[Delivery]:
        """Turns since `since` on `lanes` not answered, or answered with a draft not yet final."""
        query = (
            select(DELIVERIES)
            .where(
                DELIVERIES.c.created_at >= since,
                DELIVERIES.c.lane.in_(list(lanes)),
                DELIVERIES.c.state.in_(("open", "replied")),
                (DELIVERIES.c.owner != exclude_owner) | DELIVERIES.c.owner.is_(None),
            )
            .order_by(DELIVERIES.c.created_at)
        )
        with self.database.connect() as connection:
            rows = connection.execute(query).all()
        # A reply stored without a draft was delivered in one piece or never shown:
        # there is nothing left on the platform to finish.
        return [Delivery(**row._mapping) for row in rows if row.state == "open" or row.draft_id is not None]

    def state_of(self, user_message_id: int) -> str | None:
        query = select(DELIVERIES.c.state).where(DELIVERIES.c.user_message_id == user_message_id)
        with self.database.connect() as connection:
            return connection.execute(query).scalar()

    def claim(self, delivery: Delivery, owner: str) -> bool:
        """Take over a turn from its (dead) owner; only one claimant's UPDATE matches."""
        previous = DELIVERIES.c.owner == delivery.owner if delivery.owner else DELIVERIES.c.owner.is_(None)
        statement = (
            update(DELIVERIES)
            .where(
                DELIVERIES.c.user_message_id == delivery.user_message_id,
                DELIVERIES.c.state == delivery.state,
                previous,
            )
            .values(owner=owner, updated_at=utcnow())
        )
        with self.database.begin() as connection:
            return connection.execute(statement).rowcount == 1

    def fail(self, key: str) -> None:
        """The turn of lane message `key` failed: recovery leaves it, a re-sent copy is answered."""
        statement = (
            update(DELIVERIES)
            .where(DELIVERIES.c.ingest_key == key)
            .values(state="failed", updated_at=utcnow())
        )
        with self.database.begin() as connection:
            connection.execute(statement)

    def finish(self, user_message_id: int, state: str) -> None:
        statement = (
            update(DELIVERIES)
            .where(DELIVERIES.c.user_message_id == user_message_id)
            .values(state=state, updated_at=utcnow())
        )
        with self.database.begin() as connection:
            connection.execute(statement)
