"""Who is asking: a visitor token (bearer header or cookie) → visitor, account, session."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import HTTPException, Request, status

from bot.turns.routing import ChatSession, Route
from bot.visitors import DEFAULT_NAME, VisitorService

COOKIE_NAME = "chorus_visitor"
MAX_NAME_CHARS = 64
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


@dataclass(frozen=True)
class Credentials:
    token: str
    from_cookie: bool


@dataclass(frozen=True)
class Visitor:
    """An authenticated visitor and where the engine routes them right now."""

    id: str
    route: Route

    @property
    def session(self) -> ChatSession:
        return self.route.session

    @property
    def name(self) -> str:
        return self.route.account.display_name or DEFAULT_NAME

    def owns(self, session: ChatSession) -> bool:
        # Linked accounts share a person, so a linked visitor sees the shared session.
        return session.owner_kind == "person" and session.owner_id == self.route.account.person_id


class Visitors:
    """Visitor tokens and routing for the web lane, on top of `bot.visitors`."""

    def __init__(self, service: VisitorService, allowed_origins: list[str]) -> None:
        self.service = service
        self.allowed_origins = set(allowed_origins)

    async def create(self, name: str | None) -> tuple[str, Visitor]:
        token, visitor_id = await self.service.create()
        return token, await self.visit(visitor_id, name)

    async def authenticate(self, request: Request) -> Visitor:
        """The visitor behind the request's token; 401 without a valid one."""
        credentials = credentials_of(request)
        found = await self.service.route_for_token(credentials.token) if credentials else None
        if credentials is None or found is None:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "No valid visitor token. Start a session with POST /api/session first.",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if credentials.from_cookie and request.method not in SAFE_METHODS:
            self._check_origin(request)
        visitor_id, route = found
        if route is not None:
            return Visitor(id=visitor_id, route=route)
        return await self.visit(visitor_id, None)

    async def visit(self, visitor_id: str, name: str | None) -> Visitor:
        """Route the visitor as the engine would; `name` renames them when given."""
        route = await self.service.route(visitor_id, clean_name(name) if name is not None else None)
        return Visitor(id=visitor_id, route=route)

    async def owned_session(self, visitor: Visitor, session_id: str) -> ChatSession:
        """A session the visitor may read: 404 if unknown, 403 if someone else's."""
        session = await self.service.session(session_id)
        if session is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, "There is no such conversation.")
        if not visitor.owns(session):
            raise HTTPException(status.HTTP_403_FORBIDDEN, "This conversation belongs to someone else.")
        return session

    async def current_session(self, visitor: Visitor, session_id: str) -> ChatSession:
        """The session the visitor talks in now; 409 for an older one of theirs."""
        if session_id == visitor.session.id:
            return visitor.session
        session = await self.owned_session(visitor, session_id)
        if session.id != visitor.session.id:
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                f"This conversation was replaced by a newer one ({visitor.session.id}). Reload the chat.",
            )
        return session

    def _check_origin(self, request: Request) -> None:
        # A cookie rides along on cross-site form posts; only our own pages may use it to write.
        origin = request.headers.get("origin")
        own = f"{request.url.scheme}://{request.url.netloc}"
        if origin is not None and origin != own and origin not in self.allowed_origins:
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"Requests from {origin} are not allowed.")


def credentials_of(request: Request) -> Credentials | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return Credentials(token.strip(), from_cookie=False)
    cookie = request.cookies.get(COOKIE_NAME)
    return Credentials(cookie, from_cookie=True) if cookie else None


def clean_name(name: str) -> str:
    collapsed = " ".join(name.split())[:MAX_NAME_CHARS]
    return collapsed or DEFAULT_NAME
