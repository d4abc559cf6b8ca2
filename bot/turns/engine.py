"""The turn engine: the one place that orders the steps of a turn.

For every lane: route the message to a session, run commands, store the user's
message (idempotently) before the model is called, build the context through
`transcript`, stream the reply, store it tagged with the persona that spoke,
enqueuing the after-turn jobs that have work (memory offload, compaction; see
`bot.turns.after_turn`) in the reply's own transaction (`bot.jobs` runs them).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Protocol

from bot.config import Audience, Settings
from bot.conversation_model import ConversationModel
from bot.errors import (
    ChorusError,
    ContextOverflowError,
    EmptyMessage,
    MessageTooLong,
    ProviderError,
    StreamInterrupted,
)
from bot.logs import bind_session, turn_scope
from bot.metrics import SHED_PARTS, TOOL_STEPS
from bot.providers.base import (
    ChatProvider,
    ChatRequest,
    ProviderBlocks,
    ReasoningDelta,
    Served,
    TextDelta,
    ToolCall,
    Usage,
    shown_model,
    tool_name,
)
from bot.speech.hearing import Hearing, Unheard, names_spoken
from bot.speech.speaking import Speaking
from bot.storage.approvals import NewApproval
from bot.storage.boundary import boundary_for
from bot.storage.context_records import ContextView
from bot.storage.delivery_models import Delivery
from bot.storage.jobs import JobSpec
from bot.storage.message_append import (
    DeliveryTarget,
    DuplicateMessage,
    NewAttachment,
    NewMessage,
    StoredMessage,
    ingest_key,
    row_once_stored,
)
from bot.storage.models import ChatSession, utcnow
from bot.storage.sanitise import clean_text
from bot.storage.stores import Stores
from bot.tools.base import ChatAddress, Tool, ToolContext, ToolResult
from bot.tools.offer import schemas_of
from bot.tools.runner import run_call
from bot.turns.access import Access
from bot.turns.after_turn import AfterTurn, AfterTurnWork
from bot.turns.approvals import RUN_ELSEWHERE_RESULT, Approvals, refused_result
from bot.turns.assembly import ContextAssembler
from bot.turns.attachments import AttachmentStore
from bot.turns.containment import TurnContainment
from bot.turns.events import CommandAnswer, Delta, Reply, Thinking, ToolStatus, ToolStep, TurnEvent
from bot.turns.inbound import InboundAttachment, InboundMessage
from bot.turns.locks import SessionLocks
from bot.turns.observed import observe_turn
from bot.turns.routing import Route, resolve_route
from bot.turns.stops import RunningTurn, RunningTurns
from bot.turns.tool_images import store_tool_images
from bot.turns.tool_progress import RoundProgress
from bot.turns.tool_rounds import ToolRounds, only_reads, progress_summary
from bot.windows import WindowInfo
from persona import Persona, PersonaRegistry
from transcript import Context, StoredToolCall, TranscriptRow, count_call_tokens, count_tokens
from transcript.kinds import MessageKind, Status

log = logging.getLogger(__name__)

# Called when the provider rejects a context as too large; returns True when it
# freed room (collapsed a range), so the engine rebuilds and retries.
OverflowHandler = Callable[[ChatSession, Context], Awaitable[bool]]

QUOTE_CHARS = 200
# Lanes whose turns a restart can finish: they reach the person without the process
# that took the message (the terminal's person is gone with it).
RECOVERABLE_LANES = frozenset({"telegram", "discord", "web"})
# Ends the text of a reply the person stopped, so every lane shows it as stopped.
STOPPED_NOTE = "[Stopped.]"
# Ends the text of a reply cut because the process was shutting down.
SHUTDOWN_NOTE = "[Cut off: the server was restarting. Send your message again to get a full answer.]"
# A turn a shutdown cut while a call waited for approval: the next process asks again.
WAITING_AT_SHUTDOWN = (
    "Chorus is restarting. The tool call waiting for your answer still waits: answer it once "
    "Chorus is back, and the reply goes on."
)
RESTARTING_MESSAGE = "Chorus is restarting, so this message was not answered. Please send it again soon."
# A stored event: the person was told why their voice notes are not understood (once a conversation).
VOICE_NOTICE_EVENT = "voice notes not understood: "
# The result of a call a stop (or shutdown) cut short: stored, so no call is left without one.
STOPPED_RESULT = ToolResult.error("Stopped before it finished: the turn was stopped.")
# Shown (never stored) when the model only thought: its thinking is kept, the answer is empty.
ONLY_THOUGHT_NOTE = (
    "[The model only thought and gave no answer (its thinking is kept: /reasoning on shows it). "
    "Ask again, or ask it to answer.]"
)
OVERFLOW_MESSAGE = (
    "This conversation has grown too large for the model, even after folding older "
    "messages. Your message is saved; try /compact, /snip some messages, or /new."
)


class AfterTurnJobs(Protocol):
    """What the engine asks of the after-turn job queue (`bot.jobs` runs it)."""

    def wake(self) -> None:
        """Jobs were just enqueued in this process: look now rather than at the next poll."""

    async def drain(self) -> None:
        """Wait until no job is due or running."""

    def pending(self) -> int:
        """Jobs due or running."""
        ...


class RecognisedCommand(Protocol):
    """A chat command found in a message (`bot.commands` parses, runs and answers it)."""

    @property
    def waits_for_turn(self) -> bool:
        """False for a command about the running turn itself (/stop): it must not wait for it."""
        ...

    async def run(
        self, engine: TurnEngine, inbound: InboundMessage, route: Route, session: ChatSession
    ) -> CommandAnswer: ...


class Commands(Protocol):
    """What the engine and the lanes ask of the chat commands (`bot.commands.registry`)."""

    def recognise(self, text: str) -> RecognisedCommand | None:
        """The command `text` is, or None for an ordinary message."""
        ...

    def describe(self) -> list[tuple[str, str]]:
        """(name, description) of every command, for a platform's command menu."""
        ...


@dataclass
class TurnPlan:
    session: ChatSession
    persona: Persona
    user_message_id: int
    running: RunningTurn
    # Said after the reply: why the person's voice note was not understood (once a conversation).
    notice: str | None = None
    # /voice on: the lane also sends the reply as audio.
    spoken: bool = False
    # Where the person asked (tools see it), and whether a restart is finishing the turn.
    chat: ChatAddress | None = None
    resumed: bool = False
    # /reasoning on: the reply carries the turn's thinking; `thought` holds each call's.
    shows_reasoning: bool = False
    thought: list[str] = field(default_factory=list)
    # The model that answered the turn's last call (a fallback's, when the router moved on).
    model: str | None = None
    # What the server billed for the turn's calls so far (None: it reported nothing).
    usage: Usage | None = None
    # Who asks (bot.turns.access), and the offered tools whose calls wait for a yes.
    audience: Audience = "members"
    asking: frozenset[str] = frozenset()
    # Who asked (`<lane>:<platform user id>`, None when unknown): they may approve the turn's
    # calls that wait for a yes when they are a member (`Access.may_decide`).
    asker: str | None = None
    asker_name: str | None = None
    # Calls a shutdown cut while they waited for a yes: left, with the turn, to the next process.
    left_waiting: set[str] = field(default_factory=set)

    def reply(self, text: str, stored: StoredMessage, status: str = "complete") -> Reply:
        """The turn's final reply, once `stored` holds what was said."""
        return assistant_reply(
            with_note(text, self.notice) if self.notice else text,
            self.persona,
            self.session.id,
            status=status,
            message_id=stored.id,
            user_message_id=self.user_message_id,
            spoken=self.spoken and status == "complete" and bool(stored.content.strip()),
            spoken_text=stored.content,
            reasoning="\n\n".join(self.thought) if self.shows_reasoning and self.thought else None,
        )


@dataclass
class ModelAnswer:
    """One model call's answer as it streamed: its text, its tool calls, and the window it saw."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    # Thinking is streaming now (a `Thinking` event was sent since the last text).
    thinking: bool = False
    reasoning_stored: bool = False
    calls: list[ToolCall] = field(default_factory=list)
    window_from_seq: int | None = None
    # What the call's context was built from: the next round extends it with the rows
    # the round stored (`StoredMessage.row`, in the order they were stored).
    view: ContextView | None = None
    stored: list[TranscriptRow | None] = field(default_factory=list)
    # The answer in its provider's own blocks, stored with it for the provider to replay.
    provider_blocks: dict[str, object] | None = None

    @property
    def joined(self) -> str:
        return "".join(self.text)


@dataclass(frozen=True)
class UnansweredCalls:
    """What a recovered turn finds: its rounds so far, and the last round's calls without a result."""

    steps: int
    call_seq: int
    calls: list[ToolCall]


@dataclass
class PendingCall:
    """A round's call row: still to be stored (`message`), or stored already at `seq`."""

    message: NewMessage | None
    seq: int | None = None


class _Overflowed(Exception):
    """The context stayed too large for the model after every fold."""


class _QuestionTooLarge(Exception):
    """The person's message cannot fit the model's window even alone."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TurnEngine:
    def __init__(
        self,
        *,
        settings: Settings,
        stores: Stores,
        personas: PersonaRegistry,
        provider: ChatProvider,
        attachments: AttachmentStore,
        assembler: ContextAssembler,
        commands: Commands,
        locks: SessionLocks,
        jobs: AfterTurnJobs,
        after_turn: AfterTurnWork,
        overflow_handler: OverflowHandler | None,
        instance_id: str,
        hearing: Hearing,
        speaking: Speaking,
        access: Access,
        approvals: Approvals,
    ) -> None:
        self.settings = settings
        # Who asks: the audience of each turn, and the door strangers knock at.
        self.access = access
        self.stores = stores
        self.personas = personas
        self.provider = provider
        self.attachments = attachments
        # Voice notes heard as they are stored; replies spoken for lanes (`/voice on`).
        self.hearing = hearing
        self.speaking = speaking
        self.commands = commands
        self.assembler = assembler
        self.locks = locks
        self.running = RunningTurns()
        # Names this process in the delivery state of the turns it answers.
        self.instance_id = instance_id
        self.deliveries = stores.deliveries
        # Every store call of a turn goes through here: the event loop never waits on SQL.
        self.db = boundary_for(stores.database)
        # What a turn raises that nothing foresaw ends that turn with a reply, not the lane.
        self.containment = TurnContainment(self.db, stores.messages, stores.deliveries)
        # User messages this process's recovery is answering: a re-delivered copy waits for it.
        self.recovering: set[int] = set()
        # The jobs a stored reply (or recorded message) may enqueue, and the queue that runs them.
        self.after_turn = after_turn
        self.jobs = jobs
        # Frees room when the model rejects a context as too large; None: the turn fails at once.
        self.overflow_handler = overflow_handler
        # Calls that wait for a person's yes or no (`tools.approve`), stored so a restart keeps them.
        self.approvals = approvals

    # --- the public API lanes call ---------------------------------------------

    async def respond(self, inbound: InboundMessage) -> Reply:
        """Run a turn and return only its final reply."""
        reply: Reply | None = None
        async for event in self.stream(inbound):
            if isinstance(event, Reply):
                reply = event
        if reply is None:
            raise RuntimeError("a turn ended without its final Reply")
        return reply

    async def stream(
        self, inbound: InboundMessage, route: Route | None = None
    ) -> AsyncGenerator[TurnEvent, None]:
        """Run a turn: zero or more `Delta`s, then exactly one `Reply`.

        `route` is the message's route when the lane already resolved it for this
        request (the web lane authenticates by it), so it is not looked up twice.
        """
        # Log records written during the turn (and by its after-turn work) carry its ids.
        with turn_scope(inbound.lane):
            async with aclosing(self.containment.contain(inbound, self._stream(inbound, route))) as events:
                async for event in events:
                    yield event

    async def _stream(self, inbound: InboundMessage, route: Route | None) -> AsyncGenerator[TurnEvent, None]:
        text = clean_text(inbound.text)
        admission = await self.db.run(self.access.admit, inbound)
        if admission.audience is None:
            # A stranger not let in: at most a pairing code, and nothing is stored.
            yield Reply(kind="command" if admission.answer else "refused", text=admission.answer or "")
            return
        try:
            if route is None:
                route = await self.db.run(
                    resolve_route,
                    self.stores.identities,
                    self.stores.sessions,
                    inbound,
                    self.personas.default.id,
                )
        except ChorusError as error:
            yield Reply(kind="error", text=str(error))
            return
        bind_session(route.session.id)
        command = self.commands.recognise(text)
        if command is not None:
            # A command about the running turn (/stop) must not wait for it to end.
            async with self.locks.hold(route.session.id) if command.waits_for_turn else nullcontext():
                try:
                    await self._store_command(inbound, route, text)
                except DuplicateMessage:
                    stored_already(inbound)
                    yield Reply(kind="duplicate", text="", session_id=route.session.id)
                    return
                stored_already(inbound)
                answer = await command.run(
                    self,
                    inbound,
                    route,
                    # Read under the lock: a turn before may have switched persona or session.
                    await self.db.run(self.stores.sessions.refresh, route.session),
                )
                # The answer is part of the conversation people saw, so a reload shows it again.
                await self._store_event(route.session, "command_reply", answer.text)
            yield Reply(
                kind="command" if answer.ok else "error",
                text=answer.text,
                session_id=answer.session_id or route.session.id,
            )
            return
        if self.running.closing:
            yield Reply(kind="error", text=RESTARTING_MESSAGE, session_id=route.session.id)
            return
        # A turn that had to wait re-reads the session: the one before may have switched persona.
        waited = self.locks.busy(route.session.id)
        # aclosing: a lane that stops listening closes the whole chain at once, so
        # the partial reply is stored now rather than whenever the GC finalises it.
        async with (
            self.locks.hold(route.session.id),
            aclosing(
                observe_turn(
                    self._turn(inbound, route, text, admission.audience, reread=waited), inbound.lane
                )
            ) as turn,
        ):
            async for event in turn:
                yield event

    async def record(self, inbound: InboundMessage) -> Reply:
        """Store a group message the bot was not addressed in, as context only.

        It schedules after-turn work like a turn does: recorded messages are steps
        for memory offload and move the window, and the idle timer must cover them too.
        """
        text = clean_text(inbound.text)
        route = await self.db.run(
            resolve_route, self.stores.identities, self.stores.sessions, inbound, self.personas.default.id
        )
        async with self.locks.hold(route.session.id):
            try:
                stored, _ = await self._store_user_message(
                    inbound, route, text, jobs_for=partial(self._recorded_jobs, route.session)
                )
                stored_id = stored.id
            except DuplicateMessage as duplicate:
                return Reply(
                    kind="recorded",
                    text="",
                    session_id=route.session.id,
                    user_message_id=duplicate.existing.id,
                )
            except ChorusError as error:
                return Reply(kind="error", text=str(error), session_id=route.session.id)
            finally:
                stored_already(inbound)
        # A recorded message is a step of the conversation: memory offload counts it.
        self._wake_jobs()
        return Reply(kind="recorded", text="", session_id=route.session.id, user_message_id=stored_id)

    async def hear(self, inbound: InboundMessage, names: tuple[str, ...]) -> InboundMessage:
        """A group message whose voice notes are heard now, addressed if they say one of `names`.

        Lanes call it before deciding whether a group message is for the bot: a voice note
        that says the bot's name (or a persona's) addresses it like a mention. The files are
        fetched once: the returned message carries their bytes, and their transcripts wait
        in `hearing` for the message to be stored.
        """
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
                    stored = await asyncio.to_thread(self.attachments.store_checked, kept, data)
                    outcome = await self.hearing.hear(stored, self._stored_transcript)
                    heard.append(outcome.attachment.text or "")
            except ChorusError:
                # Storing it refuses it again, with the person told why when they are answered.
                return inbound
            fetched.append(kept)
        spoken_to = names_spoken(" ".join(heard), (*names, *(p.name for p in self.personas)))
        return replace(inbound, attachments=tuple(fetched), was_mentioned=spoken_to)

    async def resume(self, delivery: Delivery) -> AsyncGenerator[TurnEvent, None]:
        """Answer a stored user message that a process which died left unanswered."""
        session = await self.db.run(self.stores.sessions.get_session, delivery.session_id)
        if session is None:
            yield Reply(kind="error", text="This conversation no longer exists.")
            return
        async with self.locks.hold(session.id):
            if await self.db.run(self.stores.messages.reply_to, delivery.user_message_id) is not None:
                yield Reply(kind="duplicate", text="", session_id=session.id)
                return
            session = await self.db.run(self.stores.sessions.get_session, session.id) or session
            chat = ChatAddress(delivery.lane, delivery.chat_id, delivery.chat_kind, delivery.thread_id)
            audience: Audience = "groups"
            asker = None
            if session.kind != "group":
                audience = await self.db.run(self.access.audience_of_person, session.owner_id, delivery.lane)
                asker = await self.db.run(self.access.asker_on, session.owner_id, delivery.lane)
            answer = self._answer(
                session,
                self.persona_for(session),
                delivery.user_message_id,
                audience,
                chat=chat,
                resumed=True,
                asker=asker,
            )
            async with aclosing(answer) as events:
                async for event in events:
                    yield event

    async def note_draft(self, inbound: InboundMessage, draft_id: str) -> None:
        """A lane shows this turn's reply in platform message `draft_id`."""
        key = ingest_key(inbound.lane, inbound.chat_id, inbound.platform_message_id)
        if key is not None:
            await self.db.run(self.deliveries.note_draft, key, draft_id)

    async def delivered(self, inbound: InboundMessage) -> None:
        """A lane finished showing this turn's reply: nothing is left for a restart to repair."""
        key = ingest_key(inbound.lane, inbound.chat_id, inbound.platform_message_id)
        if key is not None:
            await self.db.run(self.deliveries.delivered, key)

    def stop_turn(self, session_id: str) -> bool:
        """Ask the turn running for this session in this process to stop; False when none runs.

        Its stream ends, what arrived is stored `interrupted`, and its final `Reply`
        has status `stopped`.
        """
        return self.running.stop(session_id)

    async def cancel_approvals(self, session_id: str) -> int:
        """Cancel the session's calls waiting for a yes, in any process: they will not run."""
        return await self.approvals.cancel_session(session_id)

    async def drain(self) -> None:
        """Wait until no after-turn job is due or running (tests, benchmarks)."""
        await self.jobs.drain()

    @property
    def pending_jobs(self) -> int:
        """After-turn jobs due or running."""
        return self.jobs.pending()

    def persona_for(self, session: ChatSession) -> Persona:
        return self.personas.resolve(session.persona_id)

    async def inspect(self, session: ChatSession) -> Context:
        """The context the model would see for this session's next turn."""
        return await self.assembler.assemble(session, self.persona_for(session))

    def conversation_model(self, session: ChatSession, persona: Persona) -> ConversationModel:
        """The model the conversation speaks with: its /model choice, else the persona's."""
        return self.assembler.conversation_model(session, persona)

    def model_for(self, session: ChatSession, persona: Persona) -> str:
        return self.conversation_model(session, persona).model

    def model_shown(self, session: ChatSession, persona: Persona) -> str:
        """The model as /status and /context name it: the offline demo model names itself."""
        return shown_model(self.provider, self.model_for(session, persona))

    # --- one turn ----------------------------------------------------------------

    async def _turn(
        self, inbound: InboundMessage, route: Route, text: str, audience: Audience, *, reread: bool
    ) -> AsyncGenerator[TurnEvent, None]:
        session = await self.db.run(self.stores.sessions.refresh, route.session) if reread else route.session
        persona = self.persona_for(session)
        retried = False
        try:
            stored, unheard = await self._store_user_message(inbound, route, text, deliver=True)
            user_message_id = stored.id
            notice = await self._voice_notice(session, unheard)
            stored_already(inbound)
        except DuplicateMessage as duplicate:
            stored_already(inbound)
            existing = duplicate.existing.id or 0
            answered = await self.db.run(self.stores.messages.reply_to, existing) is not None
            # Recovery is answering it, or already told the person it went unanswered.
            handled = (
                existing in self.recovering
                or await self.db.run(self.deliveries.state_of, existing) == "noticed"
            )
            if answered or handled:
                yield Reply(
                    kind="duplicate",
                    text="",
                    session_id=session.id,
                    user_message_id=duplicate.existing.id,
                )
                return
            # Stored before but never answered (a failed turn): answer it now, after any
            # tool calls that turn stored.
            user_message_id = duplicate.existing.id or 0
            notice = None
            retried = True
        except ChorusError as error:
            yield Reply(kind="error", text=str(error), session_id=session.id)
            return
        chat = ChatAddress(inbound.lane, inbound.chat_id, inbound.chat_kind, inbound.thread_id)
        answer = self._answer(
            session,
            persona,
            user_message_id,
            audience,
            chat=chat,
            resumed=retried,
            notice=notice,
            asker=(f"{inbound.lane}:{inbound.actor.user_id}", inbound.actor.display_name),
        )
        async with aclosing(answer) as events:
            async for event in events:
                yield event

    async def _answer(
        self,
        session: ChatSession,
        persona: Persona,
        user_message_id: int,
        audience: Audience,
        *,
        chat: ChatAddress | None,
        resumed: bool,
        notice: str | None = None,
        asker: tuple[str, str] | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Answer a stored user message: a live turn, or one a restart (or a retry) finishes."""
        plan = TurnPlan(
            session=session,
            persona=persona,
            user_message_id=user_message_id,
            running=self.running.begin(session.id),
            notice=notice,
            spoken=await self.db.run(self.stores.sessions.is_spoken, session.id),
            chat=chat,
            resumed=resumed,
            shows_reasoning=await self.db.run(self.stores.sessions.shows_reasoning, session.id),
            audience=audience,
            asker=asker[0] if asker else None,
            asker_name=asker[1] if asker else None,
        )
        try:
            async with aclosing(self._generate(plan)) as events:
                async for event in events:
                    yield event
        finally:
            self.running.end(session.id, plan.running)
        self._wake_jobs()

    async def _store_user_message(
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
            self.attachments.check_declared(attachment)
        stored: list[NewAttachment] = []
        unheard: Unheard | None = None
        for attachment in inbound.attachments:
            ingested = await self.attachments.ingest(attachment)
            heard = await self.hearing.hear(ingested, self._stored_transcript)
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

    async def _stored_transcript(self, sha256: str) -> str | None:
        return await self.db.run(self.stores.messages.stored_text, sha256)

    async def _voice_notice(self, session: ChatSession, unheard: Unheard | None) -> str | None:
        """The notice for a voice note not understood, the first time in this conversation only."""
        if unheard is None:
            return None
        if await self.db.run(self.stores.messages.has_event, session.id, "note", VOICE_NOTICE_EVENT):
            return None
        await self._store_event(session, "note", f"{VOICE_NOTICE_EVENT}{unheard.reason}")
        return unheard.notice()

    async def _generate(self, plan: TurnPlan) -> AsyncGenerator[TurnEvent, None]:
        """The turn's rounds: call the model → store its calls → run them → store the results → repeat.

        The rounds end when the model answers in text, or after `tools.max_steps` (or a call
        repeated `REPEAT_LIMIT` times): then it answers once more without tools, and the
        answer says why. A turn a restart recovers first runs the calls its rows leave
        unanswered, never one whose result is stored.
        """
        session = plan.session
        answer = ModelAnswer()
        finished = False
        try:
            offered = self.assembler.offered_tools(session, plan.persona, plan.audience)
            tools, plan.asking = offered.tools, offered.asking
            rounds = ToolRounds(self.settings.tools.max_steps)
            unanswered = await self._unanswered_calls(plan) if plan.resumed else None
            if unanswered is not None:
                rounds.steps = unanswered.steps
                leftover = self._run_calls(
                    plan, PendingCall(None, unanswered.call_seq), unanswered.calls, tools, None, []
                )
                async with aclosing(leftover) as events:
                    async for event in events:
                        yield event
            round_rows: list[TranscriptRow | None] = []
            while True:
                answer = ModelAnswer(view=answer.view, stored=round_rows)
                offering = tools if rounds.may_call_tools else {}
                async with aclosing(self._call_model(plan, tools, answer, final=not offering)) as events:
                    async for event in events:
                        yield event
                await self._store_reasoning(plan, answer)
                if plan.running.stopped or not answer.calls or not offering:
                    break
                round_rows = []
                call_message = self._call_message(plan, answer)
                if only_reads(answer.calls, offering) and plan.asking.isdisjoint(
                    call.name for call in answer.calls
                ):
                    # Nothing a read changes outlives a crash, so its call may be stored
                    # together with its first result (one write fewer a round): recovery
                    # from a crash in between asks the model again, as before the call.
                    pending = PendingCall(call_message)
                else:
                    call_row = await self.db.run(self.stores.messages.append, session.id, call_message)
                    round_rows.append(call_row.row)
                    pending = PendingCall(None, call_row.seq)
                # aclosing: a lane that stops listening stores the round's results before the reply.
                calls = self._run_calls(
                    plan, pending, answer.calls, offering, answer.window_from_seq, round_rows
                )
                async with aclosing(calls) as events:
                    async for event in events:
                        yield event
                rounds.record(answer.calls)
                if plan.running.stopped:
                    answer = ModelAnswer()
                    break
            TOOL_STEPS.observe(rounds.steps)
            finished = True
            if plan.left_waiting:
                # Nothing is stored: recovery in the next process takes the turn up at its call.
                yield self._error(plan, WAITING_AT_SHUTDOWN)
                return
            if plan.running.stopped:
                yield await self._stopped_reply(plan, answer.joined)
                return
            note = rounds.note()
            text = with_note(answer.joined, note) if note is not None else answer.joined
            reply = self._reply_message(plan, text, "complete")
            if note is None:
                # A note changes the answer's text: its provider blocks would no longer match.
                reply = replace(reply, provider_blocks=answer.provider_blocks)
            jobs = await self._jobs_with_work(plan, answer.view, reply, tools)
            stored = await self.db.run(self.stores.messages.append, session.id, replace(reply, jobs=jobs))
            # A model that only thought (a think never closed): its thinking is kept, the
            # reply stored empty, and the person told why no answer came.
            shown = stored.content if stored.content.strip() or not answer.reasoning else ONLY_THOUGHT_NOTE
            yield plan.reply(shown, stored)
        except _Overflowed:
            finished = True
            await self._store_event(session, "error", "context overflow")
            await self.db.run(self.deliveries.finish, plan.user_message_id, "failed")
            yield self._error(plan, OVERFLOW_MESSAGE)
        except _QuestionTooLarge as error:
            finished = True
            await self._store_event(session, "error", "message too large for the model's window")
            await self.db.run(self.deliveries.finish, plan.user_message_id, "failed")
            yield self._error(plan, error.message)
        except StreamInterrupted as error:
            finished = True
            await self._store_reasoning(plan, answer)
            text = answer.joined or error.partial_text
            stored = await self._store_reply(plan, text, "interrupted")
            notice = f"{text}\n\n[The reply was cut off: {error}]"
            yield plan.reply(notice, stored, "interrupted")
        except ProviderError as error:
            finished = True
            await self._store_event(session, "error", str(error))
            await self.db.run(self.deliveries.finish, plan.user_message_id, "failed")
            yield self._error(plan, f"{error} Your message is saved.")
        except Exception:
            # Unforeseen: no partial reply is stored; `TurnContainment` tells the person.
            finished = True
            raise
        finally:
            if not finished:
                # The lane stopped listening mid-stream (a closed browser tab, a
                # cancelled task): keep what arrived, marked as interrupted.
                await self._store_reasoning(plan, answer)
                await self._store_reply(plan, answer.joined, "interrupted")

    async def _call_model(
        self, plan: TurnPlan, tools: dict[str, Tool], answer: ModelAnswer, *, final: bool
    ) -> AsyncGenerator[TurnEvent, None]:
        """One model call, its text streamed as `Delta`s and the rest kept in `answer`.

        `final` asks for an answer in text: the tools' schemas still go (the history holds
        their calls) but `tool_choice` is "none". A context the provider rejects as too
        large is folded and built again, a bounded number of times. `answer.view`, the
        previous round's view, is extended with the rows the round stored (`answer.stored`);
        a rebuild after an overflow reads the context afresh.
        """
        session, persona = plan.session, plan.persona
        model = self.conversation_model(session, persona)
        schemas = schemas_of(tools)
        for attempt in range(self.settings.context.overflow_retries + 1):
            # After an overflow the fold changed the records (here or, racing it, in another
            # process), or the window was learned: the context is read afresh.
            earlier = answer.view if attempt == 0 else None
            answer.view, context = await self.assembler.assemble_view(
                session, persona, tools=schemas, earlier=earlier, appended=answer.stored
            )
            window = self.assembler.windows.info(model.model)
            if context.stats.question_excess_tokens > 0:
                raise _QuestionTooLarge(too_large_message(context, window))
            note_shed(session.id, model.model, context)
            # A tight window may have left some schemas out: the request offers the rest.
            offered = tuple(schema for schema in schemas if tool_name(schema) in context.tools)
            request = ChatRequest(
                messages=context.messages,
                model=model.model,
                temperature=persona.temperature,
                top_p=persona.top_p,
                max_tokens=window.reply_reserve,
                persona_id=persona.id,
                persona_name=persona.name,
                prompt_tokens=context.stats.total_tokens,
                tools=offered,
                tool_choice="none" if final and offered else None,
                thinking=session.thinking if model.thinking else None,
            )
            # What the reply records as its model, unless the provider names another (`Served`).
            plan.model = shown_model(self.provider, model.model)
            try:
                async with aclosing(plan.running.pieces(self.provider.stream(request))) as events:
                    async for event in events:
                        if isinstance(event, TextDelta):
                            answer.text.append(event.text)
                            answer.thinking = False
                            yield Delta(event.text, persona.id, persona.name, session_id=session.id)
                        elif isinstance(event, ReasoningDelta):
                            if not answer.thinking:
                                answer.thinking = True
                                yield Thinking(persona.id, persona.name, session_id=session.id)
                            answer.reasoning.append(event.text)
                        elif isinstance(event, ToolCall):
                            answer.calls.append(event)
                        elif isinstance(event, Served):
                            plan.model = event.model
                        elif isinstance(event, ProviderBlocks):
                            answer.provider_blocks = {"provider": event.provider, "blocks": event.blocks}
                        elif isinstance(event, Usage):
                            plan.usage = event if plan.usage is None else plan.usage + event
                answer.window_from_seq = context.stats.kept_seqs[0] if context.stats.kept_seqs else None
                return
            except ContextOverflowError:
                if attempt == self.settings.context.overflow_retries:
                    raise _Overflowed() from None
                # The provider learned the window the error named: when the request was
                # larger than that window's budget, a rebuild fits it without folding.
                if context.stats.total_tokens > self.assembler.windows.info(model.model).budget_tokens:
                    continue
                recovered = self.overflow_handler is not None and await self.overflow_handler(
                    session, context
                )
                if not recovered:
                    raise _Overflowed() from None

    async def _store_reasoning(self, plan: TurnPlan, answer: ModelAnswer) -> None:
        """The call's thinking, stored (once) as its own row before what the call answered.

        A `reasoning` row is an event: never the reply's text, never in the model's history.
        """
        thinking = "".join(answer.reasoning)
        if answer.reasoning_stored or not thinking.strip():
            return
        answer.reasoning_stored = True
        plan.thought.append(thinking)
        message = NewMessage(
            role="system",
            kind="reasoning",
            content=thinking,
            token_count=count_tokens(thinking),
            persona_id=plan.persona.id,
            sender_name=plan.persona.name,
            reply_to_id=plan.user_message_id,
        )
        await self.db.run(self.stores.messages.append, plan.session.id, message)

    def _call_message(self, plan: TurnPlan, answer: ModelAnswer) -> NewMessage:
        """The model's words and calls of one round, as they are stored."""
        text = answer.joined
        calls = tuple(StoredToolCall(call.id, call.name, call.arguments) for call in answer.calls)
        return NewMessage(
            role="assistant",
            content=text,
            token_count=count_tokens(text) + count_call_tokens(calls),
            persona_id=plan.persona.id,
            sender_name=plan.persona.name,
            reply_to_id=plan.user_message_id,
            kind="tool_call",
            tool_calls=calls,
            provider_blocks=answer.provider_blocks,
        )

    async def _run_calls(
        self,
        plan: TurnPlan,
        pending: PendingCall,
        calls: Sequence[ToolCall],
        tools: dict[str, Tool],
        window_from_seq: int | None,
        stored_rows: list[TranscriptRow | None],
    ) -> AsyncGenerator[TurnEvent, None]:
        """Run one round's calls at once; each result is stored as it comes, before the next call.

        Each stored row is added to `stored_rows`, for the next model call's view; a call
        row not stored yet (`pending`) is stored with the first result.

        A stop (or the lane going away) cancels the calls still running; they are stored
        as stopped, so the transcript never holds a call without its result.
        """
        session = plan.session
        running: dict[asyncio.Task[ToolResult], ToolCall] = {}
        progress = RoundProgress()
        # Calls that did not run because no one (allowed to) said yes.
        refused: set[str] = set()
        for call in calls:
            context = ToolContext(
                session=session,
                persona_id=plan.persona.id,
                chat=plan.chat,
                group=session.kind == "group",
                call_id=call.id,
                seq=pending.seq,
                window_from_seq=window_from_seq,
                on_progress=progress.reporter(call.id),
            )
            task = asyncio.create_task(self._run_call(plan, call, tools, context, progress, refused))
            plan.running.track(task)
            running[task] = call
        stored: set[str] = set()
        try:
            for call in calls:
                yield _step(plan, call, "started")
            waiting: set[asyncio.Task[ToolResult]] = set(running)
            while waiting:
                done, waiting = await progress.wait(waiting)
                still = [call for task, call in running.items() if task in waiting]
                for call, approval_id in progress.take_asked(still):
                    yield replace(_step(plan, call, "asked"), approval_id=approval_id)
                for call, reported in progress.take(still):
                    yield _step(plan, call, "progress", reported)
                for task in done:
                    call = running[task]
                    if call.id in plan.left_waiting:
                        continue
                    result = STOPPED_RESULT if task.cancelled() else task.result()
                    stored_rows += await self._store_result(plan, pending, call, result)
                    stored.add(call.id)
                    yield _step(plan, call, _ended(result, refused=call.id in refused))
        finally:
            for task in running:
                task.cancel()
            for call in calls:
                if call.id in stored or call.id in plan.left_waiting:
                    # Left waiting: its question stays pending and the call without a result,
                    # so the restarted process resumes the turn there and waits for the answer.
                    continue
                stored_rows += await self._store_result(plan, pending, call, STOPPED_RESULT)

    async def _run_call(
        self,
        plan: TurnPlan,
        call: ToolCall,
        tools: dict[str, Tool],
        context: ToolContext,
        progress: RoundProgress,
        refused: set[str],
    ) -> ToolResult:
        """One call run, once the policy allows it or a person said yes; else refused, never run.

        The question is stored beside the call (its row is stored before the round runs),
        so a turn a restart resumes finds it again and waits on, and a yes given meanwhile
        — in any process — runs the call once: the run is claimed in the approval's row.
        """
        timeout = self.settings.tools.timeout_seconds
        if call.name not in plan.asking:
            # Allowed, or not offered (denied tools are not): unknown, it fails as unknown.
            return await run_call(call, tools, context, timeout)
        if context.seq is None:
            raise RuntimeError("a call that asks for approval must be stored before it waits")
        approval = await self.approvals.request(
            NewApproval(
                session_id=plan.session.id,
                call_seq=context.seq,
                call_id=call.id,
                user_message_id=plan.user_message_id,
                tool_name=call.name,
                summary=progress_summary(call),
                asker=plan.asker,
                asker_name=plan.asker_name,
                expires_at=utcnow() + self.approvals.expiry(),
            )
        )
        assert approval.id is not None
        progress.ask(call.id, approval.id)
        try:
            approval = await self.approvals.wait(approval, keep=lambda: plan.running.reason == "shutdown")
        except asyncio.CancelledError:
            if plan.running.reason == "shutdown":
                plan.left_waiting.add(call.id)
            raise
        if approval.state != "approved":
            refused.add(call.id)
            return ToolResult.error(refused_result(approval))
        if not await self.approvals.claim_run(approval, self.instance_id):
            return ToolResult.error(RUN_ELSEWHERE_RESULT)
        result = await run_call(call, tools, context, timeout)
        await self.approvals.note_outcome(approval, "error" if result.is_error else "ok")
        return result

    async def _store_result(
        self, plan: TurnPlan, pending: PendingCall, call: ToolCall, result: ToolResult
    ) -> list[TranscriptRow | None]:
        """The result stored (after its call row, when that is still pending); the rows stored.

        Its images are stored by reference; one that cannot be is a placeholder in its text.
        """
        images = await asyncio.to_thread(store_tool_images, self.attachments, call.name, result.images)
        content = images.text_with_placeholders(result.content)
        message = NewMessage(
            role="tool",
            content=content,
            token_count=count_tokens(content),
            persona_id=plan.persona.id,
            reply_to_id=plan.user_message_id,
            status="failed" if result.is_error else "complete",
            kind="tool_result",
            tool_call_id=call.id,
            tool_name=call.name,
            attachments=images.attachments,
        )
        if pending.message is None:
            return [(await self.db.run(self.stores.messages.append, plan.session.id, message)).row]
        rows = await self.db.run(self.stores.messages.append_all, plan.session.id, [pending.message, message])
        pending.message = None
        return [stored.row for stored in rows]

    async def _unanswered_calls(self, plan: TurnPlan) -> UnansweredCalls | None:
        """The calls of the turn's last stored round that have no stored result, and its step count."""
        rows = await self.db.run(self.stores.messages.turn_rows, plan.session.id, plan.user_message_id)
        call_rows = [row for row in rows if row.tool_calls]
        if not call_rows:
            return None
        last = call_rows[-1]
        answered = {row.tool_call_id for row in rows if row.role == "tool"}
        missing = [
            ToolCall(call.id, call.name, call.arguments)
            for call in last.tool_calls
            if call.id not in answered
        ]
        return UnansweredCalls(steps=len(call_rows), call_seq=last.seq, calls=missing)

    async def _store_reply(self, plan: TurnPlan, text: str, status: Status) -> StoredMessage:
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

    async def _recorded_jobs(self, session: ChatSession, message: NewMessage) -> tuple[JobSpec, ...]:
        """The after-turn jobs with work once a recorded group message is stored.

        Checked as a turn's reply is (see `bot.turns.after_turn`), with the window read
        now and a context that recalls nothing: the bot will not answer this message, and
        a search for it would cost more than the jobs it spares. Maintenance is asked for
        whenever what recall may add could change what it finds.
        """
        every = self.after_turn.after_turn
        persona = self.persona_for(session)

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

    async def _store_command(self, inbound: InboundMessage, route: Route, text: str) -> None:
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

    async def _store_event(self, session: ChatSession, kind: MessageKind, text: str) -> None:
        # Events are `system` rows: exported with the transcript, never sent to the model.
        event = NewMessage(role="system", kind=kind, content=text, token_count=0)
        await self.db.run(self.stores.messages.append, session.id, event)

    async def _stopped_reply(self, plan: TurnPlan, text: str) -> Reply:
        stored = await self._store_reply(plan, text, "interrupted")
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

    def _error(self, plan: TurnPlan, text: str) -> Reply:
        return Reply(
            kind="error",
            text=with_note(text, plan.notice) if plan.notice else text,
            session_id=plan.session.id,
            user_message_id=plan.user_message_id,
            persona_id=plan.persona.id,
            persona_name=plan.persona.name,
        )

    def _wake_jobs(self) -> None:
        self.jobs.wake()


def too_large_message(context: Context, window: WindowInfo) -> str:
    """What a person is told when their message alone does not fit the model's window."""
    room = context.stats.question_tokens - context.stats.question_excess_tokens
    if room <= 0:
        # Not the person's fault: the instructions alone leave no room in this window.
        return (
            f"This model's window ({window.window:,} tokens) is too small for this persona's "
            "instructions and a reply, so no message can be answered. Your message is saved; "
            "the operator can choose a larger model or a shorter system prompt."
        )
    return (
        f"Your message is too long for this model: about {context.stats.question_tokens:,} tokens, "
        f"and the model's window is {window.window:,} tokens, which leaves room for about "
        f"{room:,} after its instructions and its reply. Your message is saved; please send "
        "a shorter one or split it into parts."
    )


def note_shed(session_id: str, model: str, context: Context) -> None:
    """Logs and counts what a tight window left out of this request (also in /context)."""
    if not context.stats.shed:
        return
    log.info(
        "The window of %s is tight: left out of session %s's request: %s",
        model,
        session_id,
        "; ".join(context.stats.shed),
    )
    for note in context.stats.shed:
        SHED_PARTS.labels(note.split(":", 1)[0]).inc()


def with_note(text: str, note: str) -> str:
    """A cut reply's text and the note saying why (the note alone when nothing arrived)."""
    return f"{text}\n\n{note}" if text.strip() else note


def assistant_reply(
    text: str,
    persona: Persona,
    session_id: str,
    *,
    status: str = "complete",
    message_id: int | None = None,
    user_message_id: int | None = None,
    spoken: bool = False,
    spoken_text: str = "",
    reasoning: str | None = None,
) -> Reply:
    """A turn's final reply, live or recovered; lanes show who spoke (a persona's name or webhook)."""
    return Reply(
        kind="assistant",
        text=text,
        session_id=session_id,
        message_id=message_id,
        user_message_id=user_message_id,
        persona_id=persona.id,
        persona_name=persona.name,
        status=status,
        spoken_text=spoken_text if spoken else None,
        reasoning=reasoning,
    )


def _bytes_of(data: bytes) -> Callable[[], Awaitable[bytes]]:
    async def fetch() -> bytes:
        return data

    return fetch


def stored_already(inbound: InboundMessage) -> None:
    if inbound.on_stored is not None:
        inbound.on_stored()


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


def _ended(result: ToolResult, *, refused: bool) -> ToolStatus:
    """How a call's line ends: not run (no yes), failed, or done."""
    if refused:
        return "denied"
    return "error" if result.is_error else "done"


def _step(plan: TurnPlan, call: ToolCall, status: ToolStatus, progress: str = "") -> ToolStep:
    return ToolStep(
        call.id,
        call.name,
        status,
        progress_summary(call),
        plan.session.id,
        persona_id=plan.persona.id,
        persona_name=plan.persona.name,
        progress=progress,
    )
