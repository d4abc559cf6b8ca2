"""Steady state: CPU per turn of one long conversation, after-turn work included.

One conversation, N turns back to back, each turn's after-turn jobs (context maintenance,
memory offload) finished before the next turn is sent, after 0 / 1,000 / 10,000 earlier
turns. The model is a local OpenAI-compatible server (the test suite's stand-in) run by
this benchmark's parent process, so its CPU is not counted; every configuration runs in
a fresh child process, whose CPU time (all threads: the event loop, the database
threads, the embedding thread) is read with `time.process_time()` around each stage:

- turn: `engine.respond` (store, context with recall, the model's stream, the reply);
- each job kind, and the job runner around them (claims, finishes, drains);
- embeddings (inside the above): the process's CPU while the encoder ran, for queries
  and for the offload; it also holds what other threads did meanwhile (a turn's query
  embeds beside its full-text search), so the encoder's own thread is booked apart;
- full-text search and dense search (inside the turn and the jobs): each retriever's own
  thread, the parts of recall that read the owner's whole history;
- model calls made by jobs (inside the jobs): summaries and memory distillation.

Earlier turns are preloaded the way the product stores them, only faster: LoCoMo text
as user messages and replies with their full-text rows, delivery rows, memory items
distilled by the offload itself chunk by chunk (rule distiller), vectors from the
encoder (cached on disk between runs), and one compaction summary per four turns.
Disk per 1,000 turns is the growth of the database over the measured turns, per table.

`--group K` runs a group chat instead, the bot addressed in one message in K and every
other message recorded as context only (`TurnEngine.record`), as a bot that listens to a
busy group: its table gives the CPU per message, and per recorded and addressed message
apart (no earlier turns: those are the private chat's).

    .venv/bin/python bench/steady_state.py [--turns 100] [--preload 0,1000,10000]
        [--dense on,off] [--database sqlite,postgres] [--profile DIR] [--group K]

PostgreSQL needs CHORUS_BENCH_POSTGRES_URL or CHORUS_TEST_POSTGRES_URL (a server where
the user may create databases). `--profile DIR` writes a yappi profile (CPU clock, every
thread) of each configuration's measured turns there (`pip install yappi`).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, locomo_files, locomo_turns, markdown_table  # noqa: E402

DEFAULT_TURNS = 100
DEFAULT_PRELOADS = (0, 1_000, 10_000)
WARM_UP_TURNS = 8
CHAT_ID = "steady"
USER_NAME = "Caroline"
GROUP_CHAT_ID = "steady-group"
GROUP_MEMBERS = (USER_NAME, "Melanie")
# Compaction folds what left the window every `compact_dropped_messages` (8) messages.
TURNS_PER_SUMMARY = 4
SUMMARY_TEXT = (
    "Caroline and Ada have talked about Caroline's work at the counselling centre, her plans "
    "to adopt, the support group she goes to, her painting, and the trips she took with friends "
    "and family. Decisions: she keeps the Tuesday group; she will ask the agency about the "
    "home study. Open: which art classes to take in the autumn; whether to visit her "
    "grandmother in Sweden this year. Constraints: weekends are for family. Identifiers: "
    "none so far."
)
ENCODER_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "chorus-bench"


# --- what is said ---------------------------------------------------------------------


def conversation_lines() -> list[str]:
    """Every line of the ten LoCoMo conversations, in order: user and reply alternate."""
    return [turn["text"] for path in locomo_files() for turn in locomo_turns(path) if turn["text"].strip()]


def turn_texts(lines: Sequence[str], first_turn: int, count: int) -> list[tuple[str, str]]:
    """(user message, reply) of turns `first_turn` … `first_turn + count - 1`, cycling the lines."""
    size = len(lines) - len(lines) % 2
    return [
        (lines[(2 * turn) % size], lines[(2 * turn + 1) % size])
        for turn in range(first_turn, first_turn + count)
    ]


# --- the parent: the model stand-in and one child per configuration -----------------------


def memory_answer(body: dict[str, Any]) -> str:
    """What a model distils from an excerpt: a few of its longer lines, restated as facts."""
    # The instruction is the last message: its excerpt lines are "[seq] Speaker: text".
    excerpt = body["messages"][-1]["content"]
    lines = [
        line.split("] ", 1)[-1]
        for line in excerpt.splitlines()
        if line.startswith("[") and len(line.split()) >= 8
    ]
    facts = [line.replace(": ", " said that ", 1)[:240] for line in lines[:3]]
    items = [{"kind": "fact", "content": fact, "importance": 5} for fact in facts]
    return json.dumps({"items": items})


async def serve_model_and_run(configurations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from bot.memory.distill import MODEL_INSTRUCTIONS
    from tests.fakes.openai_server import FakeOpenAI, last_user_text

    lines = conversation_lines()
    replies = dict(zip(lines[0::2], lines[1::2], strict=False))
    distilling = MODEL_INSTRUCTIONS.split("\n", 1)[0]

    def answer(body: dict[str, Any]) -> str:
        if body["messages"][-1]["content"].startswith(distilling):
            return memory_answer(body)
        return replies.get(last_user_text(body), "I see. Tell me more about that.")

    async with FakeOpenAI() as model:
        # The stand-in keeps every request; a long run has no use for them.
        model.requests = _Discarding()
        model.default = answer
        model.summary = lambda body: SUMMARY_TEXT
        rows = []
        for configuration in configurations:
            configuration["model_url"] = model.base_url
            rows.append(await run_child(configuration))
            print(markdown_table([rows[-1]["summary"]]), flush=True)
        return rows


class _Discarding(list[Any]):
    def append(self, item: Any) -> None:
        pass


async def run_child(configuration: dict[str, Any]) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--child",
        json.dumps(configuration),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        # The child's settings are the benchmark's alone (the LoCoMo folder aside).
        env={
            key: value
            for key, value in os.environ.items()
            if not key.startswith("CHORUS_") or key == "CHORUS_LOCOMO_DIR"
        }
        | {"PYTHONPATH": str(REPO)},
    )
    output, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the benchmark child failed: {configuration}")
    result: dict[str, Any] = json.loads(output.decode().strip().splitlines()[-1])
    return result


# --- the child: one configuration -------------------------------------------------------


@dataclass
class Stages:
    """CPU seconds by stage, model calls by purpose, embedded texts by caller."""

    cpu: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    # CPU of the thread that ran a call, alone: the encoder, and each retriever of recall.
    # (`cpu` books the whole process, so a stage that overlaps another's thread holds both.)
    own_thread: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: Counter[str] = field(default_factory=Counter)
    embedded: Counter[str] = field(default_factory=Counter)
    # Job runs by job name: a reply enqueues only the jobs that have work.
    runs: Counter[str] = field(default_factory=Counter)
    # Measured messages by kind: "turn" in a private chat; "recorded" or "addressed" in a group.
    messages: Counter[str] = field(default_factory=Counter)
    phase: str = "turn"
    job: str | None = None


@contextmanager
def thread_cpu_into(totals: dict[str, float], name: str) -> Iterator[None]:
    started = time.thread_time()
    try:
        yield
    finally:
        totals[name] += time.thread_time() - started


@contextmanager
def cpu_into(totals: dict[str, float], *names: str) -> Iterator[None]:
    started = time.process_time()
    try:
        yield
    finally:
        spent = time.process_time() - started
        for name in names:
            totals[name] += spent


def instrument(runtime: Any, stages: Stages) -> None:
    """Wrap the job definitions, the provider and the encoder to book CPU by stage.

    Turns and jobs run one at a time, so the process's CPU during a call is the call's.
    """
    definitions = runtime.engine.jobs.definitions
    run_job = definitions.run

    async def timed_job(name: str, session_id: str, seq: int) -> None:
        stages.job = name
        stages.runs[name] += 1
        try:
            with cpu_into(stages.cpu, f"job {name}"):
                await run_job(name, session_id, seq)
        finally:
            stages.job = None

    definitions.run = timed_job
    provider = runtime.engine.provider
    complete = provider.complete

    async def timed_complete(request: Any) -> str:
        purpose = request.purpose or "chat"
        stages.calls[purpose] += 1
        with cpu_into(stages.cpu, f"model calls of jobs ({purpose})"):
            text: str = await complete(request)
        return text

    provider.complete = timed_complete
    stream = provider.stream

    def counted_stream(request: Any) -> Any:
        stages.calls[request.purpose or "chat"] += 1
        return stream(request)

    provider.stream = counted_stream
    memory = runtime.memory
    embedder = memory.embedder if memory is not None else None
    # The model itself, behind the vectors the encoder remembers: what really ran.
    embedder = getattr(embedder, "inner", embedder)
    if embedder is not None:
        embed = embedder.embed

        def timed_embed(texts: Sequence[str]) -> Any:
            caller = stages.job or "turn (query)"
            stages.embedded[caller] += len(texts)
            with cpu_into(stages.cpu, f"embeddings: {caller}"), thread_cpu_into(stages.own_thread, "encoder"):
                return embed(texts)

        embedder.embed = timed_embed
    if memory is not None:
        time_recall(memory.recall, stages)


def time_recall(recall: Any, stages: Stages) -> None:
    """Book each retriever's own CPU: the full-text search, and the dense search (its
    matrices brought up to date and ranked).

    Both run on the thread that asked, and both read the owner's whole history: what
    grows with it. The dense query's embedding runs on a thread of its own (recall starts
    it before its full-text search), so it is the encoder's, not the dense search's.
    """
    store = recall.store
    full_text = store.full_text

    def timed_full_text(*args: Any, **kwargs: Any) -> Any:
        with thread_cpu_into(stages.own_thread, "full-text search"):
            return full_text(*args, **kwargs)

    store.full_text = timed_full_text
    dense = recall.dense
    if dense is not None:
        search = dense.search

        def timed_search(*args: Any, **kwargs: Any) -> Any:
            with thread_cpu_into(stages.own_thread, "dense search"):
                return search(*args, **kwargs)

        dense.search = timed_search


class CachedEncoder:
    """The bundled encoder, with vectors of texts seen in earlier runs read from disk."""

    def __init__(self, inner: Any) -> None:
        import numpy as np

        self.inner = inner
        self.name = inner.name
        self.path = ENCODER_CACHE / f"{inner.name}.npz"
        self.vectors: dict[str, Any] = {}
        if self.path.exists():
            stored = np.load(self.path)
            self.vectors = dict(zip(stored["keys"].tolist(), stored["vectors"], strict=True))
        self.added = 0

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        keys = [hashlib.sha1(text.encode()).hexdigest() for text in texts]
        missing = [text for key, text in zip(keys, texts, strict=True) if key not in self.vectors]
        if missing:
            fresh = self.inner.embed(missing)
            for text, vector in zip(missing, fresh, strict=True):
                self.vectors[hashlib.sha1(text.encode()).hexdigest()] = vector
            self.added += len(missing)
        return np.stack([self.vectors[key] for key in keys]) if keys else self.inner.embed([])

    def save(self) -> None:
        import numpy as np

        if not self.added:
            return
        ENCODER_CACHE.mkdir(parents=True, exist_ok=True)
        keys = list(self.vectors)
        np.savez(self.path, keys=np.array(keys), vectors=np.stack([self.vectors[key] for key in keys]))


def inbound(text: str, number: int) -> Any:
    from bot.turns.inbound import Actor, InboundMessage

    return InboundMessage(
        lane="web",
        platform_message_id=f"m{number}",
        chat_id=CHAT_ID,
        chat_kind="private",
        actor=Actor(user_id="steady-user", display_name=USER_NAME),
        text=text,
    )


def group_inbound(text: str, number: int, addressed: bool) -> Any:
    from bot.turns.inbound import Actor, InboundMessage

    member = GROUP_MEMBERS[number % len(GROUP_MEMBERS)]
    return InboundMessage(
        lane="web",
        platform_message_id=f"g{number}",
        chat_id=GROUP_CHAT_ID,
        chat_kind="group",
        actor=Actor(user_id=member.lower(), display_name=member),
        text=text,
        was_mentioned=addressed,
    )


async def send(engine: Any, text: str, number: int, every: int, stages: Stages | None = None) -> None:
    """Message `number` of the measured conversation, and its after-turn jobs, booked by stage.

    `every`: 0 for the private chat (every message a turn), else a group chat whose
    bot is addressed in one message in `every` (the others are recorded).
    """
    addressed = not every or number % every == every - 1
    kind = "turn" if not every else "addressed" if addressed else "recorded"
    message = group_inbound(text, number, addressed) if every else inbound(text, number)
    cpu: dict[str, float] = stages.cpu if stages is not None else defaultdict(float)
    with cpu_into(cpu, "turn", f"turn: {kind}"):
        if addressed:
            reply = await engine.respond(message)
            # As a lane does once it showed the reply in full.
            await engine.delivered(message)
        else:
            reply = await engine.record(message)
    if reply.kind != ("assistant" if addressed else "recorded"):
        raise RuntimeError(f"message {number} ended with {reply.kind}: {reply.text}")
    with cpu_into(cpu, "after-turn", f"after-turn: {kind}"):
        await engine.drain()
    if stages is not None:
        stages.messages[kind] += 1


async def preload(runtime: Any, turns: list[tuple[str, str]]) -> None:
    """The history of `turns` earlier turns, stored as the product stores it (see the docstring)."""
    from bot.memory.distill import RuleDistiller
    from bot.memory.offload import Offloader
    from bot.storage.context_models import SUMMARY, ContextRecord
    from bot.storage.index_text import INDEX_MESSAGE, INDEX_MESSAGE_POSTGRES, message_index_text, owner_token
    from bot.storage.message_append import INSERT_DELIVERY
    from bot.storage.models import ChatSession, Message
    from bot.turns.routing import resolve_route
    from transcript import count_tokens

    stores, engine = runtime.stores, runtime.engine
    route = resolve_route(stores.identities, stores.sessions, inbound("hello", 0), engine.personas.default.id)
    session = route.session
    if not turns:
        return
    memory = runtime.memory
    encoder = CachedEncoder(memory.embedder) if memory is not None and memory.embedder is not None else None
    offloader = Offloader(memory.store, RuleDistiller(), runtime.settings.memory, encoder) if memory else None
    postgres = runtime.database.dialect.name == "postgresql"
    token = owner_token(session.owner_kind, session.owner_id)
    started = datetime.now(UTC) - timedelta(minutes=2 * len(turns) + 60)
    chunk_turns = runtime.settings.memory.turns_threshold
    seq = 0
    for first in range(0, len(turns), chunk_turns):
        rows: list[Message] = []
        for offset, (question, answer) in enumerate(turns[first : first + chunk_turns]):
            number = first + offset
            said = started + timedelta(minutes=2 * number)
            for role, text in (("user", question), ("assistant", answer)):
                seq += 1
                rows.append(
                    Message(
                        session_id=session.id,
                        seq=seq,
                        role=role,
                        content=text,
                        persona_id="ada" if role == "assistant" else None,
                        sender_id=route.sender_id if role == "user" else None,
                        sender_name=USER_NAME if role == "user" else "Ada",
                        lane="web" if role == "user" else None,
                        platform_chat_id=CHAT_ID if role == "user" else None,
                        platform_message_id=f"p{number}" if role == "user" else None,
                        ingest_key=f"web:{CHAT_ID}:p{number}" if role == "user" else None,
                        token_count=count_tokens(text),
                        created_at=said,
                    )
                )
        with runtime.database.begin() as connection:
            from sqlmodel import Session

            with Session(bind=connection) as db:
                db.add_all(rows)
                db.flush()
                ids = [(row.id, row) for row in rows]
            index = [
                {
                    "id": identifier,
                    "owner": token,
                    "content": message_index_text(row.sender_name, row.content, row.created_at),
                }
                for identifier, row in ids
            ]
            if postgres:
                connection.execute(
                    INDEX_MESSAGE_POSTGRES, [{"id": i["id"], "content": i["content"]} for i in index]
                )
            else:
                connection.execute(INDEX_MESSAGE, index)
            connection.execute(
                INSERT_DELIVERY.statement,  # many rows at once: the Core statement
                [
                    {
                        "user_message_id": identifier,
                        "session_id": session.id,
                        "ingest_key": row.ingest_key,
                        "lane": "web",
                        "chat_id": CHAT_ID,
                        "chat_kind": "private",
                        "thread_id": None,
                        "platform_message_id": row.platform_message_id,
                        "state": "delivered",
                        "owner": engine.instance_id,
                        "created_at": row.created_at,
                        "updated_at": row.created_at,
                    }
                    for identifier, row in ids
                    if row.role == "user"
                ],
            )
            summaries = [
                ContextRecord(
                    session_id=session.id,
                    kind=SUMMARY,
                    first_seq=2 * (turn - TURNS_PER_SUMMARY) + 1,
                    last_seq=2 * turn,
                    text=SUMMARY_TEXT,
                    token_count=count_tokens(SUMMARY_TEXT),
                )
                for turn in range(first + 1, first + chunk_turns + 1)
                # The newest summary leaves the window's messages out, as compaction does.
                if turn % TURNS_PER_SUMMARY == 0 and 2 * turn <= 2 * len(turns) - 20
            ]
            with Session(bind=connection) as db:
                db.add_all(summaries)
                db.flush()
            connection.execute(
                ChatSession.__table__.update()  # type: ignore[attr-defined]
                .where(ChatSession.__table__.c.id == session.id)  # type: ignore[attr-defined]
                .values(last_seq=seq)
            )
        if offloader is not None:
            await offloader.offload(stores.sessions.get_session(session.id))
    if encoder is not None:
        encoder.save()


def database_bytes(database: Any) -> dict[str, int]:
    """Bytes each table (with its indexes) takes, and the whole database (`(all)`)."""
    from sqlalchemy import text

    with database.connect() as connection:
        if database.dialect.name == "sqlite":
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            rows = connection.execute(
                text(
                    "SELECT coalesce(i.tbl_name, d.name) AS owner, sum(d.pgsize) FROM dbstat d "
                    "LEFT JOIN sqlite_schema i ON i.name = d.name GROUP BY owner"
                )
            ).all()
            sizes = {str(name): int(size) for name, size in rows}
            page_count = connection.exec_driver_sql("PRAGMA page_count").scalar_one()
            page_size = connection.exec_driver_sql("PRAGMA page_size").scalar_one()
            sizes["(all)"] = int(page_count) * int(page_size)
            return sizes
        rows = connection.execute(
            text(
                "SELECT relname, pg_total_relation_size(c.oid) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind = 'r'"
            )
        ).all()
        sizes = {str(name): int(size) for name, size in rows}
        sizes["(all)"] = int(
            connection.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
        )
        return sizes


def table_group(table: str) -> str:
    """Tables by what they hold, for the disk breakdown."""
    if table.startswith(("messages_fts", "memory_items_fts")):
        return "full-text index"
    if table.startswith("procrastinate") or table == "jobs":
        return "jobs"
    return {
        "message_embeddings": "message vectors",
        "memory_items": "memory items (with vectors)",
        "messages": "messages",
        "deliveries": "deliveries",
        "context_records": "summaries",
    }.get(table, "other")


def settings_for(configuration: dict[str, Any], workdir: Path) -> Any:
    from bot.config import load_settings

    return load_settings(
        REPO / "config.yaml",
        {
            "CHORUS_DATABASE_URL": configuration["database_url"] or f"sqlite:///{workdir / 'chorus.db'}",
            "CHORUS_DATA_DIR": str(workdir / "data"),
            "CHORUS_MODEL_BASE_URL": configuration["model_url"],
            "CHORUS_MODEL_API_KEY": "bench-key",
            "CHORUS_MEMORY_DENSE": "true" if configuration["dense"] else "false",
            "CHORUS_LOG_LEVEL": "WARNING",
        },
    )


async def child(configuration: dict[str, Any]) -> dict[str, Any]:
    from bot.runtime import build_runtime

    preloaded, measured = configuration["preload"], configuration["turns"]
    lines = conversation_lines()
    with tempfile.TemporaryDirectory(prefix="chorus-steady-") as workdir:
        runtime = build_runtime(settings_for(configuration, Path(workdir)))
        dense = runtime.memory is not None and runtime.memory.embedder is not None
        if configuration["dense"] and not dense:
            raise SystemExit("dense recall asked for, but the dense extra is not installed")
        preload_started = time.perf_counter()
        await preload(runtime, turn_texts(lines, 0, preloaded))
        preload_seconds = time.perf_counter() - preload_started
        engine = runtime.engine
        every = int(configuration.get("group") or 0)
        texts = [user for user, _ in turn_texts(lines, preloaded, WARM_UP_TURNS + measured)]
        if every:
            # A group says every line in turn, each from its speaker.
            texts = lines[: WARM_UP_TURNS + measured]
        for number, text in enumerate(texts[:WARM_UP_TURNS]):
            await send(engine, text, preloaded + number, every)
        stages = Stages()
        instrument(runtime, stages)
        disk_before = database_bytes(runtime.database)
        load_before = os.getloadavg()[0]
        profiler = start_profile() if configuration.get("profile") else None
        started_wall = time.perf_counter()
        for number, text in enumerate(texts[WARM_UP_TURNS:], WARM_UP_TURNS):
            await send(engine, text, preloaded + number, every, stages)
        wall = time.perf_counter() - started_wall
        if profiler is not None:
            stop_profile(profiler, configuration["profile"])
        load_after = os.getloadavg()[0]
        disk_after = database_bytes(runtime.database)
        await runtime.aclose()
    return report(
        configuration, stages, disk_before, disk_after, (load_before, load_after), wall, preload_seconds
    )


def start_profile() -> Any:
    import yappi  # type: ignore[import-untyped]

    yappi.set_clock_type("cpu")
    yappi.start(builtins=False, profile_threads=True)
    return yappi


def stop_profile(yappi: Any, path: str) -> None:
    yappi.stop()
    stats = yappi.get_func_stats()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    stats.save(path, type="pstat")
    with open(path + ".txt", "w") as out:
        stats.sort("ttot").print_all(
            out=out, columns={0: ("name", 110), 1: ("ncall", 9), 3: ("ttot", 8), 4: ("tsub", 8)}
        )


def report(
    configuration: dict[str, Any],
    stages: Stages,
    disk_before: dict[str, int],
    disk_after: dict[str, int],
    loads: tuple[float, float],
    wall: float,
    preload_seconds: float,
) -> dict[str, Any]:
    from bot.jobs import MAINTAIN_CONTEXT, OFFLOAD_MEMORY

    turns = int(configuration["turns"])

    def per_turn(seconds: float) -> float:
        return round(seconds / turns * 1000, 2)

    cpu = stages.cpu
    jobs = {name: value for name, value in cpu.items() if name.startswith("job ")}
    # Each after-turn job has its column, also one that no turn of the run had work for.
    job_names = sorted({MAINTAIN_CONTEXT, OFFLOAD_MEMORY} | {name.removeprefix("job ") for name in jobs})
    job_models = {name: value for name, value in cpu.items() if name.startswith("model calls of jobs")}
    embeddings = {name: value for name, value in cpu.items() if name.startswith("embeddings: ")}
    growth: dict[str, int] = defaultdict(int)
    for table in set(disk_before) | set(disk_after):
        if table != "(all)":
            growth[table_group(table)] += disk_after.get(table, 0) - disk_before.get(table, 0)
    per_thousand = {name: round(value / turns * 1000 / 1e6, 3) for name, value in sorted(growth.items())}
    calls = {purpose: round(count / turns, 3) for purpose, count in sorted(stages.calls.items())}
    every = int(configuration.get("group") or 0)
    summary = {
        "database": "PostgreSQL" if configuration["database_url"] else "SQLite",
        "chat": f"group, 1 in {every} addressed" if every else "private",
        "dense": "on" if configuration["dense"] else "off",
        "earlier turns": f"{configuration['preload']:,}",
        "turns": turns,
        "CPU ms/turn": per_turn(cpu["turn"] + cpu["after-turn"]),
        "turn": per_turn(cpu["turn"]),
        "after-turn": per_turn(cpu["after-turn"]),
        **{name: per_turn(cpu.get(f"job {name}", 0.0)) for name in job_names},
        "runner": per_turn(cpu["after-turn"] - sum(jobs.values())),
        "embeddings": per_turn(sum(embeddings.values())),
        "encoder (own thread)": per_turn(stages.own_thread["encoder"]),
        "full-text search": per_turn(stages.own_thread["full-text search"]),
        "dense search": per_turn(stages.own_thread["dense search"]),
        "job model calls": per_turn(sum(job_models.values())),
        "model calls/turn": round(sum(stages.calls.values()) / turns, 3),
        "disk MB/1k turns": round((disk_after["(all)"] - disk_before["(all)"]) / turns * 1000 / 1e6, 2),
        "load": f"{loads[0]:.1f}–{loads[1]:.1f}",
    }
    return {
        "summary": summary,
        "embeddings ms/turn": {name: per_turn(value) for name, value in embeddings.items()},
        "texts embedded per turn": {name: round(count / turns, 2) for name, count in stages.embedded.items()},
        "jobs run per turn": {name: round(count / turns, 2) for name, count in sorted(stages.runs.items())},
        "CPU ms per message, after-turn work included, by kind": {
            kind: round((cpu[f"turn: {kind}"] + cpu[f"after-turn: {kind}"]) / count * 1000, 2)
            for kind, count in sorted(stages.messages.items())
        },
        "job model calls ms/turn": {name: per_turn(value) for name, value in job_models.items()},
        "model calls per turn": calls,
        "disk MB per 1,000 turns": per_thousand,
        "database MB at the end": round(disk_after["(all)"] / 1e6, 2),
        "wall s": round(wall, 1),
        "preload s": round(preload_seconds, 1),
    }


# --- the command line -----------------------------------------------------------------------


def postgres_admin_url() -> str:
    url = os.environ.get("CHORUS_BENCH_POSTGRES_URL") or os.environ.get("CHORUS_TEST_POSTGRES_URL")
    if not url:
        raise SystemExit("PostgreSQL needs CHORUS_BENCH_POSTGRES_URL or CHORUS_TEST_POSTGRES_URL")
    return url


@contextmanager
def fresh_postgres(admin_url: str) -> Iterator[str]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"chorus_steady_{uuid.uuid4().hex[:10]}"
    admin = create_engine(
        make_url(admin_url).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def run_all(
    turns: int,
    preloads: Sequence[int],
    dense: Sequence[bool],
    databases: Sequence[str],
    profile: str | None,
    group: int = 0,
) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []

    async def each(configuration: dict[str, Any], database: str) -> None:
        if database == "postgres":
            with fresh_postgres(postgres_admin_url()) as url:
                results.extend(await serve_model_and_run([configuration | {"database_url": url}]))
        else:
            results.extend(await serve_model_and_run([configuration | {"database_url": None}]))

    for database in databases:
        for on in dense:
            for size in preloads:
                name = f"{database}-{'dense' if on else 'plain'}-{size}{f'-group{group}' if group else ''}"
                configuration = {
                    "turns": turns,
                    "preload": size,
                    "dense": on,
                    "group": group,
                    "profile": str(Path(profile) / f"{name}.pstat") if profile else None,
                }
                asyncio.run(each(configuration, database))
    return results


def print_details(results: Sequence[dict[str, Any]]) -> None:
    print("\n### Per configuration: where the CPU and the disk go\n")
    for result in results:
        summary = result["summary"]
        print(f"- {summary['database']}, dense {summary['dense']}, {summary['earlier turns']} earlier turns:")
        for key, value in result.items():
            if key != "summary":
                print(f"  - {key}: {value}")


def main(
    turns: int = DEFAULT_TURNS,
    preloads: Sequence[int] = DEFAULT_PRELOADS,
    dense: Sequence[bool] = (False, True),
    databases: Sequence[str] = ("sqlite",),
    profile: str | None = None,
    group: int = 0,
) -> list[dict[str, Any]]:
    if group and any(preloads):
        raise SystemExit("--group runs a new group chat: earlier turns (--preload) are the private chat's")
    results = run_all(turns, preloads, dense, databases, profile, group)
    what = f"messages of a group chat, 1 in {group} addressed" if group else "turns of one conversation"
    print(f"\n### Steady state: {turns} {what}, after-turn work included\n")
    print(markdown_table([result["summary"] for result in results]))
    print_details(results)
    return [result["summary"] for result in results]


def _switches(value: str) -> list[bool]:
    return [part.strip() == "on" for part in value.split(",")]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        print(json.dumps(asyncio.run(child(json.loads(sys.argv[2])))))
        raise SystemExit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=DEFAULT_TURNS)
    parser.add_argument("--preload", default=",".join(str(size) for size in DEFAULT_PRELOADS))
    parser.add_argument("--dense", default="off,on", help="off, on or off,on")
    parser.add_argument("--database", default="sqlite", help="sqlite, postgres or sqlite,postgres")
    parser.add_argument("--profile", default=None, help="a folder for yappi profiles of the measured turns")
    parser.add_argument(
        "--group", type=int, default=0, help="a group chat, the bot addressed in 1 message in K"
    )
    arguments = parser.parse_args()
    main(
        arguments.turns,
        [int(size) for size in arguments.preload.split(",")],
        _switches(arguments.dense),
        arguments.database.split(","),
        arguments.profile,
        arguments.group,
    )
