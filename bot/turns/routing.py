"""Which person and which session an inbound message belongs to.

`Route` names the account and session rows a lane may hold on to (`Account`,
`ChatSession`); lanes take those names from here, never from `bot.storage`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.storage.identities import IdentityStore
from bot.storage.models import Account, ChatSession
from bot.storage.sessions import SessionStore
from bot.turns.inbound import InboundMessage

__all__ = ["Account", "ChatSession", "Route", "resolve_route"]


@dataclass(frozen=True)
class Route:
    """The resolved identity and session of one inbound message."""

    account: Account
    session: ChatSession

    @property
    def sender_id(self) -> str:
        return f"{self.account.lane}:{self.account.platform_user_id}"


def resolve_route(
    identities: IdentityStore, sessions: SessionStore, inbound: InboundMessage, default_persona: str
) -> Route:
    """Private chats go to the person's session; groups to the chat's (or thread's)."""
    actor = inbound.actor
    if inbound.chat_kind == "private":
        known = sessions.known_private_route(inbound.lane, actor.user_id, actor.display_name, actor.username)
        if known is not None:
            return Route(account=known[0], session=known[1])
    account = identities.account(inbound.lane, actor.user_id, actor.display_name, actor.username)
    if inbound.chat_kind == "private":
        session = sessions.private_session(account.person_id, default_persona)
    else:
        session = sessions.group_session(inbound.lane, inbound.chat_id, inbound.thread_id, default_persona)
    return Route(account=account, session=session)
