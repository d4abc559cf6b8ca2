"""What every web route needs: the runtime, visitors and the rate limit, kept on the app."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import HTTPException, Request, status

from bot.runtime import Runtime
from bot.storage.models import ChatSession
from bot.storage.store import Store
from bot.turns.attachments import AttachmentStore
from bot.turns.engine import Engine
from channels.web.ratelimit import RateLimiter
from channels.web.schemas import PersonaView, SessionState, UploadLimits
from channels.web.uploads import ACCEPTED_TYPES, MAX_FILES
from channels.web.visitors import Visitor, Visitors
from persona import Persona


@dataclass
class WebLane:
    runtime: Runtime
    visitors: Visitors
    limiter: RateLimiter

    @classmethod
    def build(cls, runtime: Runtime) -> WebLane:
        web = runtime.settings.channels.web
        return cls(
            runtime=runtime,
            visitors=Visitors(runtime.store, runtime.engine, web.cors_origins),
            limiter=RateLimiter(web.rate_limit_per_minute),
        )

    @property
    def store(self) -> Store:
        return self.runtime.store

    @property
    def engine(self) -> Engine:
        return self.runtime.engine

    @property
    def attachments(self) -> AttachmentStore:
        return self.runtime.engine.attachments

    def check_rate(self, visitor: Visitor) -> None:
        wait = self.limiter.hit(visitor.id)
        if wait is not None:
            seconds = int(wait + 0.999)
            raise HTTPException(
                status.HTTP_429_TOO_MANY_REQUESTS,
                f"You are sending messages too fast (limit: {self.limiter.per_minute} a minute). "
                f"Try again in {seconds} seconds.",
                headers={"Retry-After": str(seconds)},
            )

    def persona_of(self, session: ChatSession) -> PersonaView:
        return persona_view(self.engine.persona_for(session))

    def state_of(self, visitor: Visitor, token: str | None = None) -> SessionState:
        session = self.store.refresh(visitor.session)
        return SessionState(
            visitor_id=visitor.id,
            name=visitor.name,
            session_id=session.id,
            persona=self.persona_of(session),
            personas=[persona_view(persona) for persona in self.engine.personas],
            limits=UploadLimits(
                max_file_bytes=self.attachments.max_bytes,
                max_files=MAX_FILES,
                accepted_types=ACCEPTED_TYPES,
                max_message_chars=self.runtime.settings.limits.max_message_chars,
            ),
            token=token,
        )


async def lane_of(request: Request) -> WebLane:
    lane: WebLane = request.app.state.web_lane
    return lane


def persona_view(persona: Persona) -> PersonaView:
    return PersonaView(id=persona.id, name=persona.name, greeting=persona.greeting)
