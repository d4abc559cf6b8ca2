"""The reminders table: adding (with its job, in one transaction), listing, cancelling, and the claim.

A reminder's job is written by the job sink inside the transaction that stores the
reminder (or moves a recurring one to its next firing), so a reminder is due exactly
when its job exists. The job names the reminder and its occurrence; `claim` is one
conditional UPDATE on that pair, so however often the job runs, in however many
processes, one run delivers each occurrence.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlalchemy.sql.elements import ColumnElement

from bot.storage.jobs import JobRequest, JobSink
from bot.storage.models import as_utc, table_of, utcnow
from bot.storage.owners import Owner
from bot.storage.reminder_models import OwnerTimeZone, Reminder

REMINDERS = table_of(Reminder)
ZONES = table_of(OwnerTimeZone)
FIRE_REMINDER = "reminder.fire"
JOB_KEY_PREFIX = "reminder:"
# Reminders that still wait to be delivered (what `reminders.max_active` counts).
ACTIVE_STATES = ("scheduled", "delivering")
# A claim this old is taken for one of a run that died mid-delivery: the next run of the
# job may claim the reminder again (the platform may then show it twice; see docs/reminders.md).
CLAIM_EXPIRES = timedelta(minutes=2)


@dataclass(frozen=True)
class NewReminder:
    owner: Owner
    session_id: str
    persona_id: str
    lane: str
    chat_id: str
    chat_kind: str
    thread_id: str | None
    text: str
    due_at: datetime
    cron: str | None
    time_zone: str
    created_by: str | None


def job_key(reminder_id: int) -> str:
    """The key its job is queued under: each reminder's job is its own, never merged with another's."""
    return f"{JOB_KEY_PREFIX}{reminder_id}"


def reminder_id_of(key: str) -> int:
    return int(key.removeprefix(JOB_KEY_PREFIX))


class ReminderStore:
    def __init__(self, database: DatabaseEngine, jobs: JobSink | None = None) -> None:
        self.database = database
        self.jobs = jobs

    def _enqueue(
        self, connection: Connection, reminder_id: int, occurrence: int, due_at: datetime, lane: str
    ) -> None:
        if self.jobs is None:
            raise ValueError("this store has no job queue to fire reminders through")
        # A timer of the job system: it runs at `due_at` (at once, if that passed while down),
        # in a process that runs the reminder's lane, which shows it.
        delay = max((due_at - utcnow()).total_seconds(), 0.001)
        self.jobs.enqueue(
            connection, [JobRequest(FIRE_REMINDER, job_key(reminder_id), occurrence, due_at, delay, lane)]
        )

    def add(self, reminder: NewReminder, max_active: int) -> Reminder | None:
        """Store the reminder and its job; None when its owner already has `max_active` waiting."""
        now = utcnow()
        with self.database.begin() as connection:
            active = connection.execute(
                select(func.count())
                .select_from(REMINDERS)
                .where(*_owned_by(reminder.owner), REMINDERS.c.state.in_(ACTIVE_STATES))
            ).scalar_one()
            if active >= max_active:
                return None
            values = {
                "owner_kind": reminder.owner.kind,
                "owner_id": reminder.owner.id,
                "session_id": reminder.session_id,
                "persona_id": reminder.persona_id,
                "lane": reminder.lane,
                "chat_id": reminder.chat_id,
                "chat_kind": reminder.chat_kind,
                "thread_id": reminder.thread_id,
                "text": reminder.text,
                "due_at": reminder.due_at,
                "cron": reminder.cron,
                "time_zone": reminder.time_zone,
                "state": "scheduled",
                "occurrence": 0,
                "late": False,
                "created_by": reminder.created_by,
                "created_at": now,
                "updated_at": now,
            }
            reminder_id = connection.execute(
                REMINDERS.insert().values(**values).returning(REMINDERS.c.id)
            ).scalar_one()
            self._enqueue(connection, reminder_id, 0, reminder.due_at, reminder.lane)
        return self.get(reminder_id)

    def get(self, reminder_id: int) -> Reminder | None:
        with self.database.connect() as connection:
            row = connection.execute(select(REMINDERS).where(REMINDERS.c.id == reminder_id)).first()
        return _reminder(row._mapping) if row is not None else None

    def listed(self, owner: Owner, states: tuple[str, ...], limit: int = 50) -> list[Reminder]:
        """The owner's reminders in `states`, soonest first."""
        query = (
            select(REMINDERS)
            .where(*_owned_by(owner), REMINDERS.c.state.in_(states))
            .order_by(REMINDERS.c.due_at, REMINDERS.c.id)
            .limit(limit)
        )
        with self.database.connect() as connection:
            return [_reminder(row._mapping) for row in connection.execute(query)]

    def of_session(self, session_id: str, states: tuple[str, ...], limit: int = 50) -> list[Reminder]:
        """The reminders set in one conversation in `states`, soonest first (the console's list)."""
        query = (
            select(REMINDERS)
            .where(REMINDERS.c.session_id == session_id, REMINDERS.c.state.in_(states))
            .order_by(REMINDERS.c.due_at, REMINDERS.c.id)
            .limit(limit)
        )
        with self.database.connect() as connection:
            return [_reminder(row._mapping) for row in connection.execute(query)]

    def cancel(self, owner: Owner, reminder_id: int) -> bool:
        """Cancel a waiting reminder of `owner`; its job then finds nothing to deliver."""
        with self.database.begin() as connection:
            changed = connection.execute(
                update(REMINDERS)
                .where(
                    REMINDERS.c.id == reminder_id,
                    *_owned_by(owner),
                    REMINDERS.c.state == "scheduled",
                )
                .values(state="cancelled", updated_at=utcnow())
            ).rowcount
        return bool(changed)

    def claim(self, reminder_id: int, occurrence: int, run: str, now: datetime) -> Reminder | None:
        """Take the occurrence for this run of its job, or None when another run has it or had it.

        One conditional UPDATE: only a `scheduled` reminder still at `occurrence` (or one
        whose claim expired with a run that died) changes, so exactly one run wins.
        """
        with self.database.begin() as connection:
            changed = connection.execute(
                update(REMINDERS)
                .where(
                    REMINDERS.c.id == reminder_id,
                    REMINDERS.c.occurrence == occurrence,
                    (REMINDERS.c.state == "scheduled")
                    | ((REMINDERS.c.state == "delivering") & (REMINDERS.c.claimed_at < now - CLAIM_EXPIRES)),
                )
                .values(state="delivering", claimed_by=run, claimed_at=now, updated_at=now)
            ).rowcount
        return self.get(reminder_id) if changed else None

    def finish(
        self,
        reminder: Reminder,
        state: str,
        now: datetime,
        *,
        late: bool = False,
        platform_message_id: str | None = None,
        failure: str | None = None,
        next_due: datetime | None = None,
    ) -> None:
        """Record the claimed occurrence's outcome; a recurring reminder waits for `next_due`,
        its next occurrence's job enqueued in the same transaction."""
        assert reminder.id is not None
        values: dict[str, object] = {
            "state": state if next_due is None else "scheduled",
            "fired_at": now,
            "late": late,
            "platform_message_id": platform_message_id,
            "failure": failure[:512] if failure else None,
            "claimed_by": None,
            "claimed_at": None,
            "updated_at": now,
        }
        if next_due is not None:
            values |= {"due_at": next_due, "occurrence": reminder.occurrence + 1}
        with self.database.begin() as connection:
            connection.execute(
                update(REMINDERS)
                .where(REMINDERS.c.id == reminder.id, REMINDERS.c.occurrence == reminder.occurrence)
                .values(**values)
            )
            if next_due is not None:
                self._enqueue(connection, reminder.id, reminder.occurrence + 1, next_due, reminder.lane)

    # --- time zones ------------------------------------------------------------------

    def zone_of(self, owner: Owner) -> str | None:
        query = select(ZONES.c.zone).where(ZONES.c.owner_kind == owner.kind, ZONES.c.owner_id == owner.id)
        with self.database.connect() as connection:
            zone: str | None = connection.execute(query).scalar()
        return zone

    def set_zone(self, owner: Owner, zone: str) -> None:
        with self.database.begin() as connection:
            changed = connection.execute(
                update(ZONES)
                .where(ZONES.c.owner_kind == owner.kind, ZONES.c.owner_id == owner.id)
                .values(zone=zone, updated_at=utcnow())
            ).rowcount
            if not changed:
                connection.execute(
                    ZONES.insert().values(
                        owner_kind=owner.kind, owner_id=owner.id, zone=zone, updated_at=utcnow()
                    )
                )


def _owned_by(owner: Owner) -> tuple[ColumnElement[bool], ...]:
    return (REMINDERS.c.owner_kind == owner.kind, REMINDERS.c.owner_id == owner.id)


def _reminder(row: object) -> Reminder:
    reminder = Reminder.model_validate(dict(row))  # type: ignore[call-overload]
    reminder.due_at = as_utc(reminder.due_at)
    if reminder.claimed_at is not None:
        reminder.claimed_at = as_utc(reminder.claimed_at)
    return reminder
