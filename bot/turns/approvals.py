"""Approvals: a call the tool policy says `ask` about waits for a yes or no, durably.

Which calls ask is `bot.tools.policy`'s answer. The engine asks (`request`: one stored row
per call, found again by a turn a restart resumes), shows the question as a `ToolStep` with
status `asked`, and waits (`wait`) until the row is decided — in this process (woken at
once) or another one sharing the database (seen within `POLL_SECONDS`) — or until it
expires, which denies it. Lanes pass a click to `decide`, which counts it only from
someone who may decide (`Access.may_decide`: the asker when a member, else an admin). The
approved call's run is claimed in the row (`claim_run`), so it runs once however often it
is approved or waited on. Two processes wait on one call when the first lost its
conversation lock and the second resumed the turn: the one that claims the run stores its
result and goes on with the turn; the other leaves the turn to it (`bot.turns.round_calls`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from bot.metrics import TOOL_APPROVALS
from bot.storage.approval_models import Approval
from bot.storage.approvals import ApprovalStore, NewApproval
from bot.storage.boundary import DatabaseBoundary
from bot.storage.models import utcnow
from bot.turns.access import Access

log = logging.getLogger(__name__)

# How often a waiting call looks for a decision made in another process (one made in this
# process wakes it at once).
POLL_SECONDS = 1.0
# What the model reads as the result of a call that did not run.
DENIED_RESULT = "Denied by the user: the call was not run."
EXPIRED_RESULT = "Denied: nobody approved the call in time, so it was not run."
CANCELLED_RESULT = "Not run: the turn was stopped before the call was approved."
# Only when the process that claimed the run stored no result in time (it died mid-run).
RUN_ELSEWHERE_RESULT = "Approved, but already run once: it was not run again."


@dataclass(frozen=True)
class Decided:
    """What a click did, for the lane to tell the person who clicked."""

    ok: bool
    text: str
    approval: Approval | None = None


class Approvals:
    def __init__(
        self, store: ApprovalStore, access: Access, db: DatabaseBoundary, wait_seconds: float
    ) -> None:
        self.store = store
        # Who may decide: the asker when a member, else an admin.
        self.access = access
        self.db = db
        self.wait_seconds = wait_seconds
        # Calls waiting in this process, by approval id: a decision made here wakes them at once.
        self._waiting: dict[int, asyncio.Event] = {}

    async def request(self, approval: NewApproval) -> Approval:
        """The call's pending approval, stored now or found from before a restart."""
        stored, created = await self.db.run(self.store.ask, approval)
        if created:
            TOOL_APPROVALS.labels("asked").inc()
        else:
            log.info(
                "session %s: call %s waits again for approval %s, asked before",
                approval.session_id,
                approval.call_id,
                stored.id,
            )
        return stored

    async def wait(self, approval: Approval, keep: Callable[[], bool] = lambda: False) -> Approval:
        """The approval once decided; no decision by its `expires_at` expires it (denied).

        Cancelled (the turn stopped), it is cancelled too, unless `keep()` says the turn is
        left for another process (a shutdown), which waits on it again.
        """
        approval_id = approval.id
        assert approval_id is not None
        woken = self._waiting.setdefault(approval_id, asyncio.Event())
        try:
            while approval.state == "pending":
                left = (approval.expires_at - utcnow()).total_seconds()
                if left <= 0:
                    if await self.db.run(self.store.expire, approval_id):
                        TOOL_APPROVALS.labels("expired").inc()
                else:
                    try:
                        async with asyncio.timeout(min(left, POLL_SECONDS)):
                            await woken.wait()
                    except TimeoutError:
                        pass
                approval = await self._fresh(approval)
            return approval
        except asyncio.CancelledError:
            # The turn was stopped: a click that comes later must not run the call.
            if not keep() and await asyncio.shield(self.db.run(self.store.cancel, approval_id)):
                TOOL_APPROVALS.labels("cancelled").inc()
            raise
        finally:
            self._waiting.pop(approval_id, None)

    async def decide(
        self, approval_id: int, approved: bool, decider: str, *, operator: bool = False
    ) -> Decided:
        """A person's yes or no; it counts once, and only from someone allowed to decide
        (`operator`: the console's, who may decide any call)."""
        approval = await self.db.run(self.store.get, approval_id)
        if approval is None:
            return Decided(False, "This approval no longer exists.")
        if not operator and not await self.db.run(self.access.may_decide, decider, approval.asker):
            return Decided(
                False, "Only the person who asked (when a member) or an admin can decide this.", approval
            )
        if not await self.db.run(self.store.decide, approval_id, approved, decider):
            now = await self._fresh(approval)
            return Decided(False, f"Already {_shown_state(now)}.", now)
        TOOL_APPROVALS.labels("approved" if approved else "denied").inc()
        woken = self._waiting.get(approval_id)
        if woken is not None:
            woken.set()
        decided = await self._fresh(approval)
        return Decided(True, "Approved." if approved else "Denied.", decided)

    async def get(self, approval_id: int) -> Approval | None:
        return await self.db.run(self.store.get, approval_id)

    async def _fresh(self, approval: Approval) -> Approval:
        """The approval as stored now."""
        assert approval.id is not None
        found = await self.db.run(self.store.get, approval.id)
        return found if found is not None else approval

    async def cancel_session(self, session_id: str) -> int:
        """Cancel the session's pending approvals, wherever its turn waits (`/stop`)."""
        cancelled = await self.db.run(self.store.cancel_session, session_id)
        if cancelled:
            TOOL_APPROVALS.labels("cancelled").inc(cancelled)
        return int(cancelled)

    async def claim_run(self, approval: Approval, runner: str) -> bool:
        assert approval.id is not None
        return bool(await self.db.run(self.store.claim_run, approval.id, runner))

    async def note_outcome(self, approval: Approval, outcome: str) -> None:
        assert approval.id is not None
        await self.db.run(self.store.note_outcome, approval.id, outcome)

    def expiry(self) -> timedelta:
        return timedelta(seconds=self.wait_seconds)


def refused_result(approval: Approval) -> str:
    """What the model reads for a call that was not approved."""
    if approval.state == "expired":
        return EXPIRED_RESULT
    if approval.state == "cancelled":
        return CANCELLED_RESULT
    return DENIED_RESULT


def _shown_state(approval: Approval) -> str:
    # Still pending past its time: no process waits on it any more (its turn was given up).
    state = "expired" if approval.state == "pending" and approval.expires_at <= utcnow() else approval.state
    return {"expired": "expired (denied)", "cancelled": "cancelled (the turn stopped)"}.get(state, state)
