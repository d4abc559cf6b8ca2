"""What every web route needs: the runtime, visitors and the rate limit, kept on the app."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from fastapi import HTTPException, Request, status

from bot.history import ConversationHistory
from bot.runtime import Runtime
from bot.turns.attachments import AttachmentStore
from bot.turns.engine import TurnEngine
from bot.turns.routing import ChatSession
from bot.visitors import VisitorService
from channels.web.clients import ClientAddresses, StreamSlots
from channels.web.pushes import SessionPushes
from channels.web.ratelimit import RateLimiter
from channels.web.schemas import PersonaView, SessionState, UploadLimits
from channels.web.uploads import ACCEPTED_TYPES, MAX_FILES
from channels.web.visitors import Visitor, Visitors
from persona import Persona

log = logging.getLogger(__name__)

# How often idle visitors and expired link codes are swept (on the next new visitor).
SWEEP_SECONDS = 600.0


@dataclass
class WebLane:
    runtime: Runtime
    visitors: Visitors
    history: ConversationHistory
    limiter: RateLimiter
    clients: ClientAddresses
    visitors_per_ip: RateLimiter
    messages_per_ip: RateLimiter
    streams: StreamSlots
    # Wakes the push streams of open widgets (reminders).
    pushes: SessionPushes = field(default_factory=SessionPushes)
    _last_sweep: float | None = field(default=None, repr=False)

    @classmethod
    def build(cls, runtime: Runtime) -> WebLane:
        web = runtime.settings.channels.web
        return cls(
            runtime=runtime,
            visitors=Visitors(VisitorService.of(runtime), web.cors_origins),
            history=ConversationHistory.of(runtime),
            limiter=RateLimiter(web.rate_limit_per_minute),
            clients=ClientAddresses(web.trusted_proxies),
            visitors_per_ip=RateLimiter(web.visitors_per_ip_per_minute),
            messages_per_ip=RateLimiter(web.messages_per_ip_per_minute),
            streams=StreamSlots(web.streams_per_ip),
        )

    @property
    def engine(self) -> TurnEngine:
        return self.runtime.engine

    @property
    def attachments(self) -> AttachmentStore:
        return self.runtime.engine.attachments

    def check_rate(self, visitor: Visitor, ip: str) -> None:
        """A message's two limits: per visitor, and per client address (visitors are free to mint)."""
        too_fast(self.limiter, visitor.id, "You are sending messages too fast")
        too_fast(self.messages_per_ip, ip, "Too many messages from your address")

    def check_new_visitor(self, ip: str) -> None:
        too_fast(self.visitors_per_ip, ip, "Too many new visitors from your address")

    async def sweep_if_due(self) -> None:
        """Forget visitors that never wrote and expired link codes, at most every SWEEP_SECONDS."""
        now = time.monotonic()
        if self._last_sweep is not None and now - self._last_sweep < SWEEP_SECONDS:
            return
        self._last_sweep = now
        idle = timedelta(hours=self.runtime.settings.channels.web.idle_visitor_hours)
        visitors, codes = await self.visitors.service.forget_idle(idle)
        if visitors or codes:
            log.info("forgot %d idle web visitors and %d expired link codes", visitors, codes)

    def persona_of(self, session: ChatSession) -> PersonaView:
        return persona_view(self.engine.persona_for(session))

    async def state_of(self, visitor: Visitor, token: str | None = None) -> SessionState:
        session = await self.visitors.service.refresh(visitor.session)
        return SessionState(
            visitor_id=visitor.id,
            name=visitor.name,
            session_id=session.id,
            persona=self.persona_of(session),
            personas=[persona_view(persona) for persona in self.engine.personas],
            limits=UploadLimits(
                max_file_bytes=self.attachments.max_bytes,
                max_audio_bytes=self.attachments.audio_max_bytes,
                max_audio_seconds=self.attachments.audio_max_seconds,
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


def too_fast(limiter: RateLimiter, key: str, what: str) -> None:
    wait = limiter.hit(key)
    if wait is not None:
        seconds = int(wait + 0.999)
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"{what} (limit: {limiter.per_minute} a minute). Try again in {seconds} seconds.",
            headers={"Retry-After": str(seconds)},
        )
