"""Web visitors as the engine sees them: anonymous accounts behind a bearer token.

The web lane keeps the HTTP side (where a token comes from, allowed origins, status
codes); every store call it needs is made here, through the database's boundary, so the
lane never touches the database (docs/ARCHITECTURE.md §2). A visitor talks as the `web`
account whose platform user id is the visitor id, in a private chat of their own.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import TYPE_CHECKING

from bot.storage.boundary import boundary_for
from bot.storage.models import ChatSession
from bot.storage.stores import Stores
from bot.turns.inbound import Actor, InboundAttachment, InboundMessage
from bot.turns.routing import Route, resolve_route

if TYPE_CHECKING:
    from bot.runtime import Runtime

WEB_LANE = "web"
DEFAULT_NAME = "Visitor"


def visitor_message(
    visitor_id: str,
    name: str,
    *,
    text: str,
    message_id: str | None = None,
    attachments: tuple[InboundAttachment, ...] = (),
) -> InboundMessage:
    """What a visitor sends, as the engine takes it: a private chat of the visitor's own."""
    return InboundMessage(
        lane=WEB_LANE,
        platform_message_id=message_id or uuid.uuid4().hex,
        chat_id=visitor_id,
        chat_kind="private",
        actor=Actor(user_id=visitor_id, display_name=name),
        text=text,
        attachments=attachments,
    )


class VisitorService:
    """Visitor tokens, the route of a visitor, and the sessions a visitor may see."""

    def __init__(self, stores: Stores, default_persona: str) -> None:
        self.stores = stores
        self.default_persona = default_persona
        self.db = boundary_for(stores.database)

    @classmethod
    def of(cls, runtime: Runtime) -> VisitorService:
        return cls(runtime.stores, runtime.engine.personas.default.id)

    async def create(self) -> tuple[str, str]:
        """A new anonymous visitor: (bearer token, visitor id)."""
        return await self.db.run(self.stores.visitors.create_visitor)

    async def route_for_token(self, token: str) -> tuple[str, Route | None] | None:
        """The visitor of a token, with their route when their account and session exist; None if unknown.

        One read: it resolves the visitor for the whole request, the turn included.
        """
        found = await self.db.run(self.stores.visitors.visitor_route, token)
        if found is None:
            return None
        visitor_id, known = found
        return visitor_id, Route(account=known[0], session=known[1]) if known is not None else None

    async def route(self, visitor_id: str, name: str | None) -> Route:
        """Route the visitor as the engine would; `name` renames them, None keeps the stored name."""
        return await self.db.run(self._route, visitor_id, name)

    def _route(self, visitor_id: str, name: str | None) -> Route:
        if name is None:
            account = self.stores.identities.find_account(WEB_LANE, visitor_id)
            name = account.display_name if account is not None else DEFAULT_NAME
        probe = visitor_message(visitor_id, name, text="")
        return resolve_route(self.stores.identities, self.stores.sessions, probe, self.default_persona)

    async def session(self, session_id: str) -> ChatSession | None:
        return await self.db.run(self.stores.sessions.get_session, session_id)

    async def refresh(self, session: ChatSession) -> ChatSession:
        """The session as stored now (a command may have switched its persona)."""
        return await self.db.run(self.stores.sessions.refresh, session)

    async def forget_idle(self, idle: timedelta) -> tuple[int, int]:
        """Forget visitors idle that long who never wrote, and expired link codes: (visitors, codes)."""
        visitors = await self.db.run(self.stores.visitors.forget_idle_visitors, idle)
        codes = await self.db.run(self.stores.identities.delete_expired_link_codes)
        return visitors, codes
