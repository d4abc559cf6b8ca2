"""The turn engine: the one place that orders the steps of a turn.

For every lane: route the message to a session, run commands, store the user's
message (idempotently) before the model is called, build the context through
`transcript`, stream the reply, store it tagged with the persona that spoke,
enqueuing the after-turn jobs that have work (memory offload, compaction; see
`bot.turns.after_turn`) in the reply's own transaction (`bot.jobs` runs them).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing, nullcontext
from functools import partial
from typing import Protocol

from bot.config import Audience, Settings
from bot.conversation_model import ConversationModel
from bot.errors import ChorusError, ProviderError, StreamInterrupted
from bot.logs import bind_session, turn_scope
from bot.providers.base import shown_model
from bot.storage.boundary import boundary_for
from bot.storage.delivery_models import Delivery
from bot.storage.message_append import DuplicateMessage, ingest_key
from bot.storage.models import ChatSession
from bot.storage.sanitise import clean_text
from bot.storage.stores import Stores
from bot.tools.base import ChatAddress
from bot.turns.access import Access
from bot.turns.containment import TurnContainment
from bot.turns.events import CommandAnswer, Reply, TurnEvent
from bot.turns.inbound import InboundMessage
from bot.turns.locks import SessionLocks
from bot.turns.notices import ONLY_THOUGHT_NOTE, OVERFLOW_MESSAGE, RESTARTING_MESSAGE, WAITING_AT_SHUTDOWN
from bot.turns.observed import observe_turn
from bot.turns.plan import TurnPlan, with_note
from bot.turns.recorder import TurnRecorder
from bot.turns.rounds import Overflowed, QuestionTooLarge, RoundRunner, TurnRounds
from bot.turns.routing import Route, resolve_route
from bot.turns.stops import RunningTurns
from persona import Persona, PersonaRegistry
from transcript import Context

log = logging.getLogger(__name__)


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


class TurnEngine:
    """Orders a turn's steps: store the message → build the context → run rounds → store the reply.

    The recorder (`bot.turns.recorder`) stores the rows, the round runner
    (`bot.turns.rounds`) builds each call's context and runs the model and the tools.
    """

    def __init__(
        self,
        *,
        settings: Settings,
        stores: Stores,
        personas: PersonaRegistry,
        commands: Commands,
        locks: SessionLocks,
        access: Access,
        recorder: TurnRecorder,
        rounds: RoundRunner,
    ) -> None:
        self.settings = settings
        # Who asks: the audience of each turn, and the door strangers knock at.
        self.access = access
        self.stores = stores
        self.personas = personas
        self.commands = commands
        self.locks = locks
        self.recorder = recorder
        self.rounds = rounds
        self.running = RunningTurns()
        self.deliveries = stores.deliveries
        # Every store call of a turn goes through here: the event loop never waits on SQL.
        self.db = boundary_for(stores.database)
        # What a turn raises that nothing foresaw ends that turn with a reply, not the lane.
        self.containment = TurnContainment(self.db, stores.messages, stores.deliveries)
        # User messages this process's recovery is answering: a re-delivered copy waits for it.
        self.recovering: set[int] = set()
        # What lanes and commands reach through the engine; the collaborators own them.
        self.instance_id = recorder.instance_id
        self.attachments = recorder.media.attachments
        self.speaking = recorder.media.speaking
        self.jobs = recorder.jobs
        self.provider = rounds.provider
        self.assembler = rounds.assembler
        self.approvals = rounds.calls.approvals

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
                    await self.recorder.store_command(inbound, route, text)
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
                await self.recorder.store_event(route.session, "command_reply", answer.text)
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
                stored, _ = await self.recorder.store_user_message(
                    inbound, route, text, jobs_for=partial(self.recorder.recorded_jobs, route.session)
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
        self.recorder.wake_jobs()
        return Reply(kind="recorded", text="", session_id=route.session.id, user_message_id=stored_id)

    async def hear(self, inbound: InboundMessage, names: tuple[str, ...]) -> InboundMessage:
        """A group message whose voice notes are heard now, addressed if they say one of `names`.

        Lanes call it before deciding whether a group message is for the bot: a voice note
        that says the bot's name (or a persona's) addresses it like a mention. The files are
        fetched once: the returned message carries their bytes, and their transcripts wait
        in `hearing` for the message to be stored.
        """
        return await self.recorder.hear(inbound, (*names, *(p.name for p in self.personas)))

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
            stored, unheard = await self.recorder.store_user_message(inbound, route, text, deliver=True)
            user_message_id = stored.id
            notice = await self.recorder.voice_notice(session, unheard)
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
        self.recorder.wake_jobs()

    async def _generate(self, plan: TurnPlan) -> AsyncGenerator[TurnEvent, None]:
        """The turn once its message is stored: run the rounds → store the reply.

        A failure is stored as an event and said (the message stays saved); a reply the
        person stopped, the lane left or the stream cut keeps what arrived, marked so.
        """
        session = plan.session
        rounds = TurnRounds()
        finished = False
        try:
            async with aclosing(self.rounds.run(plan, rounds)) as events:
                async for event in events:
                    yield event
            answer = rounds.answer
            finished = True
            if plan.handed_over:
                # The process that ran the call this turn waited on answers it: nothing is stored here.
                yield Reply(
                    kind="duplicate", text="", session_id=session.id, user_message_id=plan.user_message_id
                )
                return
            if plan.left_waiting:
                # Nothing is stored: recovery in the next process takes the turn up at its call.
                yield self._error(plan, WAITING_AT_SHUTDOWN)
                return
            if plan.running.stopped:
                yield await self.recorder.store_stopped(plan, answer.joined)
                return
            stored = await self.recorder.store_answer(plan, answer, rounds.note(), rounds.tools)
            # A model that only thought (a think never closed): its thinking is kept, the
            # reply stored empty, and the person told why no answer came.
            shown = stored.content if stored.content.strip() or not answer.reasoning else ONLY_THOUGHT_NOTE
            yield plan.reply(shown, stored)
        except Overflowed:
            finished = True
            await self.recorder.store_event(session, "error", "context overflow")
            await self.db.run(self.deliveries.finish, plan.user_message_id, "failed")
            yield self._error(plan, OVERFLOW_MESSAGE)
        except QuestionTooLarge as error:
            finished = True
            await self.recorder.store_event(session, "error", "message too large for the model's window")
            await self.db.run(self.deliveries.finish, plan.user_message_id, "failed")
            yield self._error(plan, error.message)
        except StreamInterrupted as error:
            finished = True
            await self.rounds.store_reasoning(plan, rounds.answer)
            text = rounds.answer.joined or error.partial_text
            stored = await self.recorder.store_reply(plan, text, "interrupted")
            notice = f"{text}\n\n[The reply was cut off: {error}]"
            yield plan.reply(notice, stored, "interrupted")
        except ProviderError as error:
            finished = True
            await self.recorder.store_event(session, "error", str(error))
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
                await self.rounds.store_reasoning(plan, rounds.answer)
                await self.recorder.store_reply(plan, rounds.answer.joined, "interrupted")

    def _error(self, plan: TurnPlan, text: str) -> Reply:
        return Reply(
            kind="error",
            text=with_note(text, plan.notice) if plan.notice else text,
            session_id=plan.session.id,
            user_message_id=plan.user_message_id,
            persona_id=plan.persona.id,
            persona_name=plan.persona.name,
        )


def stored_already(inbound: InboundMessage) -> None:
    if inbound.on_stored is not None:
        inbound.on_stored()
