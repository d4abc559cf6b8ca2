"""The approvals table: asking (once per call), deciding, expiring, cancelling, and the run's claim.

Every change of state is one conditional UPDATE on the row's current state: of two
clicks, two processes, or a click racing the expiry, the first UPDATE that matches
decides and the others change nothing. An approved call's run is claimed the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlalchemy.exc import IntegrityError

from bot.storage.approval_models import Approval
from bot.storage.models import as_utc, table_of, utcnow

APPROVALS = table_of(Approval)
# The states a decision (or its absence) ends in: none of them leaves the call to run but `approved`.
DECIDED = ("approved", "denied", "expired", "cancelled")


@dataclass(frozen=True)
class NewApproval:
    session_id: str
    call_seq: int
    call_id: str
    user_message_id: int
    tool_name: str
    summary: str
    asker: str | None
    asker_name: str | None
    expires_at: datetime


class ApprovalStore:
    def __init__(self, database: DatabaseEngine) -> None:
        self.database = database

    def ask(self, new: NewApproval) -> tuple[Approval, bool]:
        """The call's approval, and True when stored now; False: as stored before (a restart asks again)."""
        created = True
        try:
            with self.database.begin() as connection:
                row = {**new.__dict__, "state": "pending", "created_at": utcnow()}
                connection.execute(insert(APPROVALS).values(**row))
        except IntegrityError:
            created = False
        found = self.by_call(new.session_id, new.call_seq, new.call_id)
        if found is None:
            raise RuntimeError(f"the approval of call {new.call_id} was neither stored nor found")
        return found, created

    def get(self, approval_id: int) -> Approval | None:
        return self._one(APPROVALS.c.id == approval_id)

    def by_call(self, session_id: str, call_seq: int, call_id: str) -> Approval | None:
        return self._one(
            (APPROVALS.c.session_id == session_id)
            & (APPROVALS.c.call_seq == call_seq)
            & (APPROVALS.c.call_id == call_id)
        )

    def decide(self, approval_id: int, approved: bool, decider: str) -> bool:
        """Approve or deny a pending, unexpired approval; False when it was decided (or expired) already."""
        now = utcnow()
        return self._move(
            approval_id,
            ("pending",),
            {"state": "approved" if approved else "denied", "decided_by": decider, "decided_at": now},
            APPROVALS.c.expires_at > now,
        )

    def expire(self, approval_id: int) -> bool:
        """No answer came in time: the call is denied."""
        return self._move(approval_id, ("pending",), {"state": "expired", "decided_at": utcnow()})

    def cancel(self, approval_id: int) -> bool:
        """The turn was stopped: the call will not run, whatever is clicked later."""
        return self._move(approval_id, ("pending",), {"state": "cancelled", "decided_at": utcnow()})

    def cancel_session(self, session_id: str) -> int:
        """Cancel every pending approval of a session (`/stop`, from any process); how many."""
        query = (
            update(APPROVALS)
            .where(APPROVALS.c.session_id == session_id, APPROVALS.c.state == "pending")
            .values(state="cancelled", decided_at=utcnow())
        )
        with self.database.begin() as connection:
            return connection.execute(query).rowcount

    def claim_run(self, approval_id: int, runner: str) -> bool:
        """Take the one run of an approved call; False when it is not approved or is run already."""
        query = (
            update(APPROVALS)
            .where(
                APPROVALS.c.id == approval_id, APPROVALS.c.state == "approved", APPROVALS.c.ran_by.is_(None)
            )
            .values(ran_by=runner)
        )
        with self.database.begin() as connection:
            return connection.execute(query).rowcount == 1

    def note_outcome(self, approval_id: int, outcome: str) -> None:
        with self.database.begin() as connection:
            connection.execute(update(APPROVALS).where(APPROVALS.c.id == approval_id).values(outcome=outcome))

    def recent(self, limit: int) -> list[Approval]:
        """The newest approvals first, for the console."""
        query = select(APPROVALS).order_by(APPROVALS.c.id.desc()).limit(limit)
        with self.database.connect() as connection:
            return [_approval(row._mapping) for row in connection.execute(query)]

    def of_session(self, session_id: str) -> list[Approval]:
        """A conversation's approvals, in the order they were asked (the console's transcript)."""
        query = select(APPROVALS).where(APPROVALS.c.session_id == session_id).order_by(APPROVALS.c.id)
        with self.database.connect() as connection:
            return [_approval(row._mapping) for row in connection.execute(query)]

    def of_calls(self, calls: Iterable[tuple[str, int]]) -> list[Approval]:
        """The approvals of the calls in these (session id, call row seq) pairs (the console's Tool calls)."""
        wanted = set(calls)
        if not wanted:
            return []
        query = select(APPROVALS).where(
            APPROVALS.c.session_id.in_({session_id for session_id, _ in wanted}),
            APPROVALS.c.call_seq.in_({seq for _, seq in wanted}),
        )
        with self.database.connect() as connection:
            found = [_approval(row._mapping) for row in connection.execute(query)]
        return [approval for approval in found if (approval.session_id, approval.call_seq) in wanted]

    def _move(
        self, approval_id: int, states: tuple[str, ...], values: dict[str, object], *more: object
    ) -> bool:
        query = (
            update(APPROVALS)
            .where(APPROVALS.c.id == approval_id, APPROVALS.c.state.in_(states), *more)  # type: ignore[arg-type]
            .values(**values)
        )
        with self.database.begin() as connection:
            return connection.execute(query).rowcount == 1

    def _one(self, condition: object) -> Approval | None:
        with self.database.connect() as connection:
            row = connection.execute(select(APPROVALS).where(condition)).first()  # type: ignore[arg-type]
        return _approval(row._mapping) if row is not None else None


def _approval(mapping: object) -> Approval:
    approval = Approval.model_validate(dict(mapping))  # type: ignore[call-overload]
    approval.expires_at = as_utc(approval.expires_at)
    if approval.decided_at is not None:
        approval.decided_at = as_utc(approval.decided_at)
    return approval
