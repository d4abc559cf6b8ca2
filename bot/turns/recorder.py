"""The turn's rows: the person's message, commands and events, the reply, and the jobs they enqueue.

The engine (`bot.turns.engine`) decides when each is stored; this stores it, through the
database boundary, with the after-turn jobs that have work (see `bot.turns.after_turn`)
enqueued in the row's own transaction, and wakes the queue that runs them (`bot.jobs`).
The model's rounds store their own rows (`bot.turns.rounds`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Protocol

from bot.config import Settings
from bot.errors import ChorusError, EmptyMessage, MessageTooLong
from bot.speech.hearing import Hearing, Unheard, names_spoken
from bot.speech.speaking import Speaking
from bot.storage.boundary import boundary_for
from bot.storage.context_records import ContextView
from bot.storage.jobs import JobSpec
from bot.storage.message_append import (
    DeliveryTarget,
    NewAttachment,
    NewMessage,
    StoredMessage,
    row_once_stored,
)
from bot.storage.models import ChatSession, utcnow
from bot.storage.stores import Stores
from bot.tools.base import Tool
from bot.tools.offer import schemas_of
from bot.turns.after_turn import AfterTurn, AfterTurnWork
from bot.turns.assembly import ContextAssembler
from bot.turns.attachments import AttachmentStore
from bot.turns.events import Reply
from bot.turns.inbound import InboundAttachment, InboundMessage
from bot.turns.plan import TurnPlan, with_note
from bot.turns.rounds import ModelAnswer
from bot.turns.routing import Route
from persona import PersonaRegistry
from transcript import count_tokens
from transcript.kinds import MessageKind, Status

log = logging.getLogger(__name__)

QUOTE_CHARS = 200
# Lanes whose turns a restart can finish: they reach the person without the process
# that took the message (the terminal's person is gone with it).
RECOVERABLE_LANES = frozenset({"telegram", "discord", "web"})
# A stored event: the person was told why their voice notes are not understood (once a conversation).
VOICE_NOTICE_EVENT = "voice notes not understood: "
# Ends the text of a reply the person stopped, so every lane shows it as stopped.
STOPPED_NOTE = "[Stopped.]"
# Ends the text of a reply cut because the process was shutting down.
SHUTDOWN_NOTE = "[Cut off: the server was restarting. Send your message again to get a full answer.]"


class AfterTurnJobs(Protocol):
    """What the engine asks of the after-turn job queue (`bot.jobs` runs it)."""

    def wake(self) -> None:
        """Jobs were just enqueued in this process: look now rather than at the next poll."""

    async def drain(self) -> None:
        """Wait until no job is due or running."""

    def pending(self) -> int:
        """Jobs due or running."""
        ...


@dataclass(frozen=True)
class TurnMedia:
    """A turn's files and voice: attachments stored, voice notes heard, replies spoken (`/voice on`)."""

    attachments: AttachmentStore
    hearing: Hearing
    speaking: Speaking


class TurnRecorder:
    """Stores a turn's rows and enqueues the after-turn jobs they have work for."""

    def __init__(
        self,
        *,
        settings: Settings,
        stores: Stores,
        personas: PersonaRegistry,
        assembler: ContextAssembler,
        media: TurnMedia,
        jobs: AfterTurnJobs,
        after_turn: AfterTurnWork,
        instance_id: str,
    ) -> None:
        self.settings = settings
        self.stores = stores
        # Every store call of a turn goes through here: the event loop never waits on SQL.
        self.db = boundary_for(stores.database)
        self.personas = personas
        self.assembler = assembler
        self.media = media
        # The jobs a stored reply (or recorded message) may enqueue, and the queue that runs them.
        self.jobs = jobs
        self.after_turn = after_turn
        # Names this process in the delivery state of the turns it answers.
        self.instance_id = instance_id

    async def store_user_message(
        self,
        inbound: InboundMessage,
        route: Route,
        text: str,
        *,
        deliver: bool = False,
        jobs: tuple[JobSpec, ...] = (),
        jobs_for: Callable[[NewMessage], Awaitable[tuple[JobSpec, ...]]] | None = None,
    ) -> tuple[StoredMessage, Unheard | None]:
        """The stored message, and why a voice note in it went unheard (None: all heard).

        `jobs_for`, when given, tells the jobs from the message about to be stored
        (instead of `jobs`): they are enqueued in the message's own transaction.
        """
        if not text.strip() and not inbound.attachments:
            raise EmptyMessage()
        limit = self.settings.limits.max_message_chars
        if len(text) > limit:
            raise MessageTooLong(len(text), limit)
        for attachment in inbound.attachments:
            self.media.attachments.check_declared(attachment)
        stored: list[NewAttachment] = []
        unheard: Unheard | None = None
        for attachment in inbound.attachments:
            ingested = await self.media.attachments.ingest(attachment)
            heard = await self.media.hearing.hear(ingested, self.stored_transcript)
            stored.append(heard.attachment)
            unheard = unheard or heard.unheard
        content = with_quote(text, inbound)
        message = NewMessage(
            role="user",
            content=content,
            token_count=count_tokens(content),
            sender_id=route.sender_id,
            sender_name=inbound.actor.display_name,
            lane=inbound.lane,
            platform_chat_id=inbound.chat_id,
            platform_message_id=inbound.platform_message_id,
            created_at=inbound.received_at,
            attachments=tuple(stored),
            delivery=(
                DeliveryTarget(inbound.chat_kind, inbound.thread_id, self.instance_id)
                if deliver and inbound.lane in RECOVERABLE_LANES
                else None
            ),
            jobs=jobs,
        )
        if jobs_for is not None:
            message = replace(message, jobs=await jobs_for(message))
        return await self.db.run(self.stores.messages.append, route.session.id, message), unheard

    async def stored_transcript(self, sha256: str) -> str | None:
        return await self.db.run(self.stores.messages.stored_text, sha256)

    async def voice_notice(self, session: ChatSession, unheard: Unheard | None) -> str | None:
        """The notice for a voice note not understood, the first time in this conversation only."""
        if unheard is None:
            return None
        if await self.db.run(self.stores.messages.has_event, session.id, "note", VOICE_NOTICE_EVENT):
            return None
        await self.store_event(session, "note", f"{VOICE_NOTICE_EVENT}{unheard.reason}")
        return unheard.notice()

    async def store_answer(
        self, plan: TurnPlan, answer: ModelAnswer, note: str | None, tools: dict[str, Tool]
    ) -> StoredMessage:
        """Store the rounds' final answer as the reply, with the after-turn jobs it has work for."""
        text = with_note(answer.joined, note) if note is not None else answer.joined
        reply = self._reply_message(plan, text, "complete")
        if note is None:
            # A note changes the answer's text: its provider blocks would no longer match.
            reply = replace(reply, provider_blocks=answer.provider_blocks)
        jobs = await self._jobs_with_work(plan, answer.view, reply, tools)
        return await self.db.run(self.stores.messages.append, plan.session.id, replace(reply, jobs=jobs))

    async def store_stopped(self, plan: TurnPlan, text: str) -> Reply:
        stored = await self.store_reply(plan, text, "interrupted")
        shutdown = plan.running.reason == "shutdown"
        note = SHUTDOWN_NOTE if shutdown else STOPPED_NOTE
        if shutdown:
            log.warning(
                "turn cut (shutdown): session %s, message %d, %d characters kept",
                plan.session.id,
                plan.user_message_id,
                len(text),
            )
        return plan.reply(with_note(text, note), stored, "interrupted" if shutdown else "stopped")

    async def store_reply(self, plan: TurnPlan, text: str, status: Status) -> StoredMessage:
        """Store a reply a stop, a cut or a failure ended: it asks for every after-turn job."""
        return await self.db.run(
            self.stores.messages.append, plan.session.id, self._reply_message(plan, text, status)
        )

    def _reply_message(self, plan: TurnPlan, text: str, status: Status) -> NewMessage:
        return NewMessage(
            role="assistant",
            content=text,
            token_count=count_tokens(text),
            persona_id=plan.persona.id,
            sender_name=plan.persona.name,
            reply_to_id=plan.user_message_id,
            status=status,
            model=plan.model,
            prompt_tokens=plan.usage.prompt_tokens if plan.usage else None,
            cached_tokens=plan.usage.cached_tokens if plan.usage else None,
            cache_write_tokens=plan.usage.cache_write_tokens if plan.usage else None,
            # The after-turn work commits with the reply: no reply, no jobs.
            jobs=self.after_turn.after_turn,
        )

    async def _jobs_with_work(
        self, plan: TurnPlan, view: ContextView | None, reply: NewMessage, tools: dict[str, Tool]
    ) -> tuple[JobSpec, ...]:
        """The after-turn jobs with work once `reply` is stored (see `bot.turns.after_turn`).

        `view` is what the turn's last model call saw; with the reply as its newest row it
        gives the context the next turn would start from, built as the turn's own were
        (the rows' model turns and the turn's memory are reused, so the build is cheap).
        """
        if view is None or not view.rows:
            return reply.jobs
        schemas = schemas_of(tools)

        def jobs_with_work() -> tuple[JobSpec, ...]:
            # The reply's seq is at least the next one; an event stored meanwhile moves it on.
            row = row_once_stored(reply, view.rows[-1].seq + 1, utcnow())
            after = self.assembler.view(plan.session.id, view, [row])
            context = self.assembler.assemble_now(plan.session, plan.persona, after, schemas)
            return self.after_turn.with_work(AfterTurn(plan.session, after, context))

        return await self._checked_jobs(plan.session.id, jobs_with_work, reply.jobs)

    async def recorded_jobs(self, session: ChatSession, message: NewMessage) -> tuple[JobSpec, ...]:
        """The after-turn jobs with work once a recorded group message is stored.

        Checked as a turn's reply is (see `bot.turns.after_turn`), with the window read
        now and a context that recalls nothing: the bot will not answer this message, and
        a search for it would cost more than the jobs it spares. Maintenance is asked for
        whenever what recall may add could change what it finds.
        """
        every = self.after_turn.after_turn
        persona = self.personas.resolve(session.persona_id)

        def jobs_with_work() -> tuple[JobSpec, ...]:
            view = self.assembler.view(session.id)
            if not view.rows:
                return every
            row = row_once_stored(message, view.rows[-1].seq + 1, utcnow())
            after = self.assembler.view(session.id, view, [row])
            context, allowance = self.assembler.assemble_without_recall(session, persona, after)
            return self.after_turn.with_work(AfterTurn(session, after, context, allowance))

        return await self._checked_jobs(session.id, jobs_with_work, every)

    async def _checked_jobs(
        self, session_id: str, check: Callable[[], tuple[JobSpec, ...]], every: tuple[JobSpec, ...]
    ) -> tuple[JobSpec, ...]:
        try:
            return await self.db.run(check)
        except Exception:
            # The message is stored whatever happens here: with every job, which checks for itself.
            log.exception("session %s: could not tell which after-turn jobs have work", session_id)
            return every

    async def store_command(self, inbound: InboundMessage, route: Route, text: str) -> None:
        """Record a command as an event; its platform id makes a re-delivery a duplicate."""
        await self.db.run(
            self.stores.messages.append,
            route.session.id,
            NewMessage(
                role="system",
                kind="command",
                content=text,
                token_count=0,
                sender_id=route.sender_id,
                sender_name=inbound.actor.display_name,
                lane=inbound.lane,
                platform_chat_id=inbound.chat_id,
                platform_message_id=inbound.platform_message_id,
                created_at=inbound.received_at,
            ),
        )

    async def store_event(self, session: ChatSession, kind: MessageKind, text: str) -> None:
        # Events are `system` rows: exported with the transcript, never sent to the model.
        event = NewMessage(role="system", kind=kind, content=text, token_count=0)
        await self.db.run(self.stores.messages.append, session.id, event)

    async def hear(self, inbound: InboundMessage, names: tuple[str, ...]) -> InboundMessage:
        """The group message with its voice notes heard, addressed if they say one of `names`."""
        audio = [a for a in inbound.attachments if a.kind in ("audio", "voice")]
        if inbound.was_mentioned or not audio:
            return inbound
        fetched: list[InboundAttachment] = []
        heard: list[str] = []
        for attachment in inbound.attachments:
            try:
                data = await attachment.fetch()
                kept = replace(attachment, fetch=_bytes_of(data))
                if attachment in audio:
                    stored = await asyncio.to_thread(self.media.attachments.store_checked, kept, data)
                    outcome = await self.media.hearing.hear(stored, self.stored_transcript)
                    heard.append(outcome.attachment.text or "")
            except ChorusError:
                # Storing it refuses it again, with the person told why when they are answered.
                return inbound
            fetched.append(kept)
        spoken_to = names_spoken(" ".join(heard), names)
        return replace(inbound, attachments=tuple(fetched), was_mentioned=spoken_to)

    def wake_jobs(self) -> None:
        self.jobs.wake()


def _bytes_of(data: bytes) -> Callable[[], Awaitable[bytes]]:
    async def fetch() -> bytes:
        return data

    return fetch


def with_quote(text: str, inbound: InboundMessage) -> str:
    """The stored text of a reply carries a short quote of what it answers."""
    quoted = inbound.reply_to
    if quoted is None or not quoted.text:
        return text
    snippet = " ".join(quoted.text.split())
    if len(snippet) > QUOTE_CHARS:
        snippet = snippet[: QUOTE_CHARS - 1] + "…"
    who = f"{quoted.sender_name}: " if quoted.sender_name else ""
    return f"> {who}{snippet}\n{text}"
