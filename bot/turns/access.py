"""Who is asking: the audience of a turn, and the door strangers knock at (docs/access.md).

Admins are the platform user ids each lane lists in `access.admins` (and anyone whose
accounts are linked to one); members are those a lane's allow-list names or an admin
approved; groups are group chats; everyone else is a stranger, whom the lane's
`access.dm` lets in (open), asks to pair (a code an admin approves) or ignores. The tool
policy (`bot.tools.policy`) answers per audience; the engine asks here before it routes
a message, so a stranger who is not let in leaves no account, session or message behind.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import timedelta

from bot.config import Audience, Settings
from bot.lanes import LaneSettings
from bot.storage.models import ChatSession
from bot.storage.stores import Stores
from bot.turns.inbound import InboundMessage

PAIRING_MESSAGE = (
    "Hi! I only talk with people the owner knows. Your pairing code is {code}: "
    "send it to the owner, who can approve it with /pair {code}."
)


@dataclass(frozen=True)
class Admission:
    """A message's audience, or (None) that it gets no turn; `answer` is said instead of one."""

    audience: Audience | None
    answer: str | None = None


class Access:
    def __init__(self, settings: Settings, stores: Stores) -> None:
        self.settings = settings
        self.stores = stores
        # When each lane handed out its latest codes (this process): at most
        # `limits.pairing_codes_per_minute` a minute, so a flood costs a bounded number of writes.
        self._issued: dict[str, deque[float]] = {}
        # admit runs on the database threads, several of them on PostgreSQL.
        self._issued_lock = threading.Lock()

    def lane(self, name: str) -> LaneSettings | None:
        """The lane's settings; None for one that is not registered (the operator's terminal)."""
        found = getattr(self.settings.channels, name, None)
        return found if isinstance(found, LaneSettings) else None

    def admit(self, inbound: InboundMessage) -> Admission:
        """The audience of `inbound`, or what a stranger is told instead of a turn (store calls)."""
        if inbound.chat_kind == "group":
            return Admission("groups")
        lane = self.lane(inbound.lane)
        if lane is None:
            return Admission("admins")
        actor = inbound.actor
        known = self._known(self._accounts(inbound.lane, actor.user_id, actor.username))
        if known is not None:
            return Admission(known)
        mode = lane.dm_mode()
        if mode == "open":
            return Admission(lane.stranger_audience())
        if mode == "allowlist":
            return Admission(None)
        pairings = self.stores.pairings
        # Told already, or past the lane's rate: nothing more, so a flood costs nothing.
        if pairings.waiting_code(inbound.lane, actor.user_id) is not None or not self._may_issue(
            inbound.lane
        ):
            return Admission(None)
        limits = self.settings.limits
        issued = pairings.issue(
            inbound.lane,
            actor.user_id,
            actor.display_name,
            timedelta(seconds=limits.pairing_code_ttl_seconds),
            limits.pairing_pending_max,
        )
        return Admission(None, PAIRING_MESSAGE.format(code=issued.code))

    def _may_issue(self, lane: str) -> bool:
        now = time.monotonic()
        with self._issued_lock:
            issued = self._issued.setdefault(lane, deque())
            while issued and issued[0] <= now - 60:
                issued.popleft()
            if len(issued) >= self.settings.limits.pairing_codes_per_minute:
                return False
            issued.append(now)
            return True

    def audience_of_person(self, person_id: str, lane_name: str) -> Audience:
        """The audience of a person's private turn a restart finishes (store calls)."""
        accounts = [
            (linked.lane, linked.platform_user_id, linked.username)
            for linked in self.stores.identities.accounts_of(person_id)
        ]
        known = self._known(accounts)
        if known is not None:
            return known
        lane = self.lane(lane_name)
        return "admins" if lane is None else lane.stranger_audience()

    def audience_of_session(self, session: ChatSession) -> Audience:
        """The audience a session's turns have now (store calls): a group's, else its person's
        on the lane of their first account, as a restart finishing their turn finds it."""
        if session.kind == "group":
            return "groups"
        accounts = self.stores.identities.accounts_of(session.owner_id)
        return self.audience_of_person(session.owner_id, accounts[0].lane if accounts else "")

    def _accounts(self, lane: str, user_id: str, username: str | None) -> list[tuple[str, str, str | None]]:
        """This platform user's accounts: every one linked to theirs, or just this one."""
        account = self.stores.identities.find_account(lane, user_id)
        if account is None:
            return [(lane, user_id, username)]
        return [
            (linked.lane, linked.platform_user_id, linked.username)
            for linked in self.stores.identities.accounts_of(account.person_id)
        ]

    def _known(self, accounts: list[tuple[str, str, str | None]]) -> Audience | None:
        """admins or members when one of these accounts is; None for a stranger."""
        lanes = [(self.lane(name), user_id, username) for name, user_id, username in accounts]
        if any(lane is not None and user_id in lane.access.admins for lane, user_id, _ in lanes):
            return "admins"
        if any(
            lane is not None and lane.allow_listed(user_id, username) for lane, user_id, username in lanes
        ):
            return "members"
        if self.stores.pairings.is_approved([(name, user_id) for name, user_id, _ in accounts]):
            return "members"
        return None

    def asker_on(self, person_id: str, lane_name: str) -> tuple[str, str] | None:
        """`<lane>:<platform user id>` and name of the person's account on this lane, for a
        turn a restart finishes (store calls); None when they have none there."""
        for account in self.stores.identities.accounts_of(person_id):
            if account.lane == lane_name:
                return f"{lane_name}:{account.platform_user_id}", account.display_name
        return None

    def may_decide(self, decider: str, asker: str | None) -> bool:
        """Whether `decider` may answer a call `asker` made (`<lane>:<platform user id>` both,
        store calls): the asker when a member, else an admin (docs/access.md)."""
        standing = self.standing(decider)
        return standing == "admins" or (decider == asker and standing == "members")

    def standing(self, who: str) -> Audience | None:
        """The audience `<lane>:<platform user id>` has in a private chat now, without
        handing out a code; None for a stranger the lane does not let in (store calls)."""
        lane_name, _, user_id = who.partition(":")
        lane = self.lane(lane_name)
        if lane is None:
            return "admins"
        known = self._known(self._accounts(lane_name, user_id, None))
        if known is not None:
            return known
        return lane.stranger_audience() if lane.dm_mode() == "open" else None

    def is_admin(self, lane_name: str, person_id: str) -> bool:
        """Whether this person (on this lane) is an admin (store calls): /pair answers only them."""
        if self.lane(lane_name) is None:
            return True
        accounts = [
            (linked.lane, linked.platform_user_id, linked.username)
            for linked in self.stores.identities.accounts_of(person_id)
        ]
        return self._known(accounts) == "admins"
