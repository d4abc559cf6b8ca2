"""Wiring: settings → database, stores, personas, provider, engine."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from sqlalchemy.engine import Engine as DatabaseEngine

from bot.commands.registry import CommandRegistry
from bot.config import Settings
from bot.context.maintenance import ContextMaintainer
from bot.conversation_model import conversation_model
from bot.features import features
from bot.health import LaneHealth
from bot.jobs.definitions import JobDefinitions, JobQueue
from bot.jobs.runner import LocalJobRunner
from bot.memory import MemoryService, choose_distiller
from bot.memory.dense import load_embedder
from bot.providers import DemoProvider
from bot.providers.base import ChatProvider
from bot.providers.observed import ObservedProvider
from bot.providers.router import make_router
from bot.reminders.delivery import ReminderLanes
from bot.reminders.service import ReminderService
from bot.roles import ProcessRoles
from bot.speech.hearing import Hearing
from bot.speech.service import SpeechService
from bot.speech.speaking import Speaking
from bot.storage import migrate
from bot.storage.boundary import boundary_for
from bot.storage.database import create_database_engine
from bot.storage.jobs import JobSink, SqliteJobs
from bot.storage.models import ChatSession
from bot.storage.stores import Stores
from bot.tools.base import Tool
from bot.tools.mcp import McpServers
from bot.tools.offer import ToolOffer
from bot.tools.policy import ToolPolicy
from bot.tools.registry import StaticTools, ToolRegistry
from bot.turns.access import Access
from bot.turns.approvals import Approvals
from bot.turns.assembly import ContextAssembler
from bot.turns.attachments import AttachmentStore
from bot.turns.engine import TurnEngine
from bot.turns.locks import SessionLocks, SharedLocks
from bot.turns.recorder import TurnMedia, TurnRecorder
from bot.turns.round_calls import RoundCalls
from bot.turns.rounds import RoundRunner
from bot.windows import ModelWindows
from persona import Persona, PersonaRegistry
from transcript.tokens import encoding

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """Everything a lane or a CLI command needs, built once per process."""

    settings: Settings
    database: DatabaseEngine
    stores: Stores
    engine: TurnEngine
    jobs: JobQueue
    # Roles one process per database plays (polling Telegram for a bot).
    roles: ProcessRoles
    # Every tool this process offers: the built-ins and the MCP servers', started by `chorus serve`.
    tools: ToolRegistry
    mcp_servers: McpServers
    # Reminders, and the lanes of this process that show them when they fall due.
    reminders: ReminderService
    memory: MemoryService | None = None
    context: ContextMaintainer | None = None
    # The speech service voice notes are heard and replies spoken with; None when unset.
    speech: SpeechService | None = None
    lanes: LaneHealth = field(default_factory=LaneHealth)
    _closed: bool = field(default=False, init=False, repr=False)

    async def aclose(self) -> None:
        """Finish background work and release connections; closing twice does nothing more."""
        if self._closed:
            return
        self._closed = True
        # Running jobs finish; waiting ones stay queued for the next worker.
        await self.jobs.aclose()
        # A stdio server's process ends with its connection, never outliving Chorus.
        await self.mcp_servers.aclose()
        if self.memory is not None:
            await self.memory.aclose()
        await self.engine.provider.aclose()
        if self.speech is not None:
            await self.speech.aclose()
        if self.engine.locks.shared is not None:
            await self.engine.locks.shared.aclose()
        await self.roles.aclose()
        # Calls already handed to the database threads finish before the connections close.
        boundary_for(self.database).close()
        self.database.dispose()


def build_personas(settings: Settings) -> PersonaRegistry:
    personas = [
        Persona(
            id=item.id,
            name=item.name,
            prompt=item.prompt,
            greeting=item.greeting,
            model=item.model,
            temperature=item.temperature,
            top_p=item.top_p,
            avatar_url=item.avatar_url,
            tools=tuple(item.tools) if item.tools is not None else None,
        )
        for item in settings.personas
    ]
    return PersonaRegistry(personas, settings.default_persona)


def _conversation_model_id(settings: Settings, personas: PersonaRegistry, session: ChatSession) -> str:
    """The model a session's conversation speaks with (memory distillation asks it too)."""
    persona = personas.resolve(session.persona_id)
    return conversation_model(settings, persona.model, session.model_choice).model


def build_runtime(
    settings: Settings, *, provider: ChatProvider | None = None, apply_migrations: bool = True
) -> Runtime:
    # The tokenizer table takes ~0.3 s to load: now, rather than inside the first turn.
    encoding()
    database = create_database_engine(settings.database_url)
    if apply_migrations:
        migrate.upgrade(database)
    # The parts are built in the order they need each other; none is filled in afterwards.
    sink = job_sink(database)
    stores = Stores.open(database, jobs=sink)
    if provider is None:
        # Every key and fallback endpoint behind one router; the offline demo without a model server
        # (Anthropic's needs no base URL).
        configured = settings.model.base_url or settings.model.provider == "anthropic"
        provider = (
            make_router(settings.model, settings.models)
            if configured
            else DemoProvider(settings.model.demo_window)
        )
    # Each model's window: asked of its server once, learned from overflows, calibrated by answers.
    windows = ModelWindows(settings, stores.profiles, discover=provider.discover_window)
    # Every model call is counted, teaches its model's window, and its failures are kept
    # for the operator's health page.
    provider = ObservedProvider(provider, windows)
    if provider.name == "demo":
        log.warning(
            "No model configured: replies come from the offline DEMO model. "
            "Set CHORUS_MODEL_BASE_URL (and CHORUS_MODEL_API_KEY) to use a real one."
        )
    persona_registry = build_personas(settings)
    memory = MemoryService(
        stores.memory,
        settings.memory,
        choose_distiller(
            provider,
            settings.model.name,
            windows,
            partial(_conversation_model_id, settings, persona_registry),
        ),
        load_embedder() if settings.memory.dense else None,
    )
    attachments = AttachmentStore.from_settings(settings)
    speech = SpeechService.from_settings(settings.speech)
    if speech is None:
        log.info("No speech service (speech.base_url): voice notes are kept with their length only.")
    # Every tool a turn may offer: the built-ins join once context maintenance exists
    # (two of them work through it), MCP servers' tools once `chorus serve` connects them.
    mcp_servers = McpServers(settings.tools)
    tools = ToolRegistry([], ToolPolicy(settings.tools))
    assembler = ContextAssembler(
        settings,
        stores.messages,
        stores.records,
        attachments,
        windows,
        memory=memory if settings.memory.enabled else None,
        tools=ToolOffer(tools, provider.accepts_tools),
    )
    # Who asks each turn, and who may decide a call that waits for a yes.
    access = Access(settings, stores)
    context = ContextMaintainer(
        settings=settings,
        messages=stores.messages,
        assembler=assembler,
        personas=persona_registry,
        provider=provider,
        # The tools the conversation's last request offered, which after-turn requests repeat.
        audience_of=access.audience_of_session,
    )
    # The lanes running in this process: they show reminders, and take the jobs that need them.
    lanes = ReminderLanes()
    reminders = ReminderService(stores.reminders, stores.messages, persona_registry, settings, lanes)
    commands = CommandRegistry(maintainer=context, memory=memory, reminders=reminders)
    builtins: list[Tool] = []
    definitions = JobDefinitions()
    for feature in features(stores.sessions, stores.messages, context, memory, reminders):
        commands.add_all(feature.commands)
        builtins.extend(feature.tools)
        for job in feature.jobs:
            definitions.add_job(job)
    tools.add_source(StaticTools(builtins))
    # After the built-ins: a server's `<server>__<tool>` name never shadows one of them.
    tools.add_source(mcp_servers)
    # Names this process in the delivery state of its turns and as the owner of its job claims.
    instance_id = uuid.uuid4().hex
    jobs = job_queue(stores, sink, settings, definitions, instance_id, lanes.names)
    reminders.wake = jobs.wake
    approvals = Approvals(stores.approvals, access, boundary_for(database), settings.tools.approval_seconds)
    recorder = TurnRecorder(
        settings=settings,
        stores=stores,
        personas=persona_registry,
        assembler=assembler,
        media=TurnMedia(
            attachments=attachments,
            hearing=Hearing(speech, settings.data_dir, settings.limits.audio_max_seconds),
            speaking=Speaking(speech),
        ),
        jobs=jobs,
        after_turn=definitions,
        instance_id=instance_id,
    )
    rounds = RoundRunner(
        settings=settings,
        stores=stores,
        provider=provider,
        assembler=assembler,
        overflow_handler=context.recover_from_overflow,
        prefixes=context.prefixes,
        calls=RoundCalls(
            settings=settings,
            stores=stores,
            attachments=attachments,
            approvals=approvals,
            instance_id=instance_id,
        ),
    )
    engine = TurnEngine(
        settings=settings,
        stores=stores,
        personas=persona_registry,
        commands=commands,
        locks=SessionLocks(shared_locks(settings) if database.dialect.name == "postgresql" else None),
        access=access,
        recorder=recorder,
        rounds=rounds,
    )
    return Runtime(
        settings=settings,
        database=database,
        stores=stores,
        engine=engine,
        jobs=jobs,
        tools=tools,
        mcp_servers=mcp_servers,
        memory=memory,
        context=context,
        reminders=reminders,
        speech=speech,
        roles=ProcessRoles(settings.database_url, shared=database.dialect.name == "postgresql"),
    )


def job_sink(database: DatabaseEngine) -> JobSink:
    """Where the message store enqueues a reply's jobs, inside the reply's transaction:
    procrastinate on PostgreSQL, the `jobs` table on SQLite."""
    if database.dialect.name == "postgresql":
        from bot.jobs.postgres import ProcrastinateSink

        return ProcrastinateSink()
    return SqliteJobs(database)


def job_queue(
    stores: Stores,
    sink: JobSink,
    settings: Settings,
    definitions: JobDefinitions,
    owner: str,
    running_lanes: Callable[[], Sequence[str]] = tuple,
) -> JobQueue:
    """What runs the jobs `sink` takes: a runner in this process over the SQLite table, or
    procrastinate's worker (which also takes the jobs of the `running_lanes`)."""
    if isinstance(sink, SqliteJobs):
        return LocalJobRunner(sink, definitions, settings.jobs, owner)
    from bot.jobs.postgres import ProcrastinateJobs

    return ProcrastinateJobs(
        stores.messages, settings.database_url, definitions, settings.jobs, running_lanes
    )


def shared_locks(settings: Settings) -> SharedLocks:
    """Several processes may serve a PostgreSQL database: a session's turns queue across all of them."""
    from bot.storage.advisory_locks import LOCK_CONNECTIONS, PostgresSessionLocks

    return PostgresSessionLocks(settings.database_url, LOCK_CONNECTIONS)
