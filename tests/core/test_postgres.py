"""The same storage code on PostgreSQL: migrations, turns, idempotency, ordering, export.

Runs when CHORUS_TEST_POSTGRES_URL points at a server where the user may create
databases (scripts/test.sh starts one); each test gets a fresh database.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text
from sqlmodel import SQLModel

import bot.storage.tables  # noqa: F401
from bot.cli.transfer import export_json, import_json
from bot.memory.backfill import BackfillResult, backfill_embeddings
from bot.runtime import Runtime
from bot.storage import database, migrate
from bot.storage.database import create_database_engine
from bot.storage.memory_store import MemoryStore
from bot.storage.owners import Owner
from tests.support.peers import needs_dense_model, needs_postgres
from tests.support.runtime import inbound

pytestmark = needs_postgres


def test_migrations_build_the_model_schema_on_postgres(postgres_url):
    engine = create_database_engine(postgres_url)
    migrate.upgrade(engine)
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    # Full-text (GIN) indexes and the message index table are created by hand in migrations
    # and have no model.
    differences = [
        d for d in differences if not (d[0] in ("remove_index", "remove_table") and "fts" in d[1].name)
    ]
    # The stored search vectors (migration 0015) are PostgreSQL's half of the full-text index.
    differences = [d for d in differences if not (d[0] == "remove_column" and d[3].name == "search_vector")]
    # procrastinate's tables and indexes come from its own schema (the job queue), not from models.
    differences = [d for d in differences if "procrastinate" not in str(getattr(d[1], "name", ""))]
    assert differences == []
    engine.dispose()


async def test_turns_idempotency_and_ordering_on_postgres(postgres_url, runtimes, tmp_path, fake_openai):
    runtime = runtimes(tmp_path, database_url=postgres_url, model_base_url=fake_openai.base_url)
    engine = runtime.engine
    first = await engine.respond(inbound("hello", message_id="pg-1"))
    again = await engine.respond(inbound("hello", message_id="pg-1"))
    assert (first.kind, again.kind) == ("assistant", "duplicate")
    await engine.respond(inbound("/persona sage"))
    replies = await asyncio.gather(*(engine.respond(inbound(f"q{i}")) for i in range(4)))
    stored = runtime.stores.messages.messages(first.session_id)
    assert [m.seq for m in stored] == list(range(1, len(stored) + 1))
    conversation = [m for m in stored if m.role != "system"]
    assert [m.role for m in conversation] == ["user", "assistant"] * 5
    assert {r.persona_id for r in replies} == {"sage"}


async def test_link_and_export_import_on_postgres(postgres_url, runtimes, tmp_path):
    runtime = runtimes(tmp_path, database_url=postgres_url)
    engine = runtime.engine
    web = await engine.respond(inbound("I am on the web", lane="web", user_id="v1"))
    code = (
        (await engine.respond(inbound("/link", lane="web", user_id="v1")))
        .text.split(": ")[1]
        .split()[0]
        .strip("`")
    )
    await engine.respond(inbound(f"/link {code}", lane="discord", user_id="d1"))
    discord = await engine.respond(inbound("and now on discord", lane="discord", user_id="d1"))
    assert discord.session_id == web.session_id
    session = runtime.stores.sessions.get_session(web.session_id)
    exported = export_json(runtime.stores.messages, engine.attachments, session)
    copy = import_json(runtime.stores, engine.attachments, exported)
    again = export_json(runtime.stores.messages, engine.attachments, copy)
    for document in (exported, again):
        document["session"].pop("id")
        document["session"].pop("created_at")
    assert again == exported


async def test_memory_offload_snapshot_and_recall_on_postgres(postgres_url, runtimes, tmp_path):
    runtime = runtimes(
        tmp_path, database_url=postgres_url, memory_turns_threshold="1", memory_idle_seconds="0"
    )
    engine = runtime.engine

    async def say(text: str, **where) -> str:
        reply = await engine.respond(inbound(text, **where))
        await engine.drain()
        return reply.text

    await say("We decided the blue database server hosts billing.")
    await say("We decided to paint the office blue.")
    await say("It turns out the database server ran out of disk.")
    await say("We decided the group picnic is on Sunday.", chat_id="g1", chat_kind="group", user_id="u2")
    recalled = await say("/recall database server disk")
    assert recalled.splitlines()[0].startswith("1. [user message #5, ")
    assert "ran out of disk" in recalled.splitlines()[0]
    assert "picnic" not in recalled
    listing = await say("/memory")
    assert "3 remembered items" in listing.splitlines()[0]


async def test_linking_merges_two_persons_on_postgres(postgres_url, runtimes, tmp_path):
    runtime = runtimes(tmp_path, database_url=postgres_url)
    engine = runtime.engine
    older = await engine.respond(
        inbound("My sister lives in Porto with two cats.", lane="telegram", user_id="t")
    )
    newer = await engine.respond(
        inbound("We decided to use PostgreSQL for billing.", lane="web", user_id="v")
    )
    for reply in (older, newer):
        await runtime.memory.flush(runtime.stores.sessions.get_session(reply.session_id))
    code = (
        (await engine.respond(inbound("/link", lane="telegram", user_id="t")))
        .text.split(": ")[1]
        .split()[0]
        .strip("`")
    )
    linked = await engine.respond(inbound(f"/link {code}", lane="web", user_id="v"))
    assert linked.session_id == newer.session_id and older.session_id[:8] in linked.text
    recalled = await engine.respond(inbound("/recall sister Porto", lane="web", user_id="v"))
    assert "My sister lives in Porto" in recalled.text
    listed = await engine.respond(inbound("/memory", lane="telegram", user_id="t"))
    assert "Porto" in listed.text and "PostgreSQL" in listed.text


SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
POSTGRES_GROUP = Owner("group", "web:g1")


async def record_a_support_group_talk(runtime: Runtime) -> None:
    """Caroline's news among nineteen weather notes, said on 2023-05-08, offloaded to memory."""
    group = {"chat_id": "g1", "chat_kind": "group"}
    lines = [("Caroline", "I went to a support group yesterday.")] + [
        ("Mel", f"Weather note {n}: cloudy and mild.") for n in range(19)
    ]
    for name, text_ in lines:
        message = inbound(text_, user_id=name.lower(), display_name=name, **group)
        await runtime.engine.record(type(message)(**{**message.__dict__, "received_at": SAID}))
    await runtime.engine.drain()


async def test_dates_and_sender_names_on_postgres(postgres_url, runtimes, tmp_path):
    runtime = runtimes(tmp_path, database_url=postgres_url, memory_idle_seconds="0")
    await record_a_support_group_talk(runtime)
    assert runtime.memory is not None
    first = runtime.memory.recall.search(POSTGRES_GROUP, "What did Caroline share?", 1)[0]
    assert first.sender_name == "Caroline" and first.said_at.date().isoformat() == "2023-05-08"
    item = next(i for i in MemoryStore(runtime.database).all_items(POSTGRES_GROUP) if "support" in i.content)
    assert item.content.endswith("(yesterday = 2023-05-07)")


@needs_dense_model
async def test_dense_vectors_and_their_backfill_on_postgres(postgres_url, runtimes, tmp_path):
    runtime = runtimes(tmp_path, database_url=postgres_url, memory_idle_seconds="0", memory_dense=True)
    await record_a_support_group_talk(runtime)
    assert runtime.memory is not None and runtime.memory.embedder is not None
    memory = MemoryStore(runtime.database)
    assert len(memory.vectors_after(POSTGRES_GROUP, "message", 0)) == 20
    hit = runtime.memory.recall.search(POSTGRES_GROUP, "a meeting for people who help each other", 1)[0]
    assert "support group" in hit.text
    # A row that lost its vector gets it back from the backfill.
    item = next(i for i in memory.all_items(POSTGRES_GROUP) if "support" in i.content)
    with runtime.database.begin() as connection:
        connection.execute(text("UPDATE memory_items SET embedding = NULL WHERE id = :id"), {"id": item.id})
        connection.execute(
            text("DELETE FROM message_embeddings WHERE message_id = (SELECT min(id) FROM messages)")
        )
    assert backfill_embeddings(memory, runtime.memory.embedder) == BackfillResult(1, 1)
    assert len(memory.vectors_after(POSTGRES_GROUP, "message", 0)) == 20


async def test_messages_are_found_by_cjk_characters_and_dates_on_postgres(runtimes, tmp_path, postgres_url):
    from datetime import UTC, datetime

    from bot.memory.recall import query_terms
    from bot.search_terms import words
    from bot.storage.memory_store import MemoryStore
    from bot.storage.owners import Owner

    # Memory off: only the message index can answer.
    runtime = runtimes(tmp_path, database_url=postgres_url, memory_enabled="false")
    said = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    for text_ in ("我们昨天看到一只袋熊", "I went to a support group yesterday.", "Lunch was fine."):
        message = inbound(text_, user_id="c", display_name="Caroline", chat_id="g2", chat_kind="group")
        await runtime.engine.record(type(message)(**{**message.__dict__, "received_at": said}))
    memory = MemoryStore(runtime.database)
    owner = Owner("group", "web:g2")

    def found(terms: list[str]) -> list[str]:
        return [hit.text for hit in memory.full_text(owner, terms, 5)["message"]]

    assert found(words("袋熊")) == ["我们昨天看到一只袋熊"]
    # The day "yesterday" (昨天) points at, and the month the messages were said in.
    on_the_day = found(query_terms("What happened on 7 May 2023?"))
    assert sorted(on_the_day) == ["I went to a support group yesterday.", "我们昨天看到一只袋熊"]
    assert "Lunch was fine." in found(query_terms("What was said in May 2023?"))
    assert not found(query_terms("What was said in June 2023?"))


def test_the_message_search_migration_indexes_stored_messages_on_postgres(postgres_url):
    from datetime import UTC, datetime

    from bot.search_terms import words
    from bot.storage.memory_store import MemoryStore
    from bot.storage.owners import Owner

    engine = create_database_engine(postgres_url)
    migrate.upgrade(engine, "0007_jobs")
    said = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO sessions (id, kind, owner_kind, owner_id, title, last_seq, document_count, "
                "created_at, updated_at) VALUES ('s1', 'group', 'group', 'web:g3', '', 1, 0, :at, :at)"
            ),
            {"at": said},
        )
        connection.execute(
            text(
                "INSERT INTO messages (session_id, seq, role, content, sender_name, token_count, "
                "attachment_count, status, created_at) VALUES ('s1', 1, 'user', '一只袋熊 yesterday', "
                "'Caroline', 3, 0, 'done', :at)"
            ),
            {"at": said},
        )
    migrate.upgrade(engine)
    owner = Owner("group", "web:g3")
    memory = MemoryStore(engine)
    assert [hit.seq for hit in memory.full_text(owner, words("袋熊"), 5)["message"]] == [1]
    assert [hit.seq for hit in memory.full_text(owner, ["d20230507", "caroline"], 5)["message"]] == [1]
    engine.dispose()


def _backend_of(engine) -> int:
    with engine.connect() as connection:
        return connection.execute(text("SELECT pg_backend_pid()")).scalar_one()


def test_a_connection_in_steady_use_is_not_pinged_before_each_call(postgres_url, monkeypatch):
    engine = create_database_engine(postgres_url)
    pings = []
    ping = engine.dialect.do_ping
    monkeypatch.setattr(engine.dialect, "do_ping", lambda connection: pings.append(1) or ping(connection))
    backends = {_backend_of(engine) for _ in range(5)}
    assert len(backends) == 1  # one pooled connection, reused
    assert pings == []  # a ping is a round trip more on every database call
    engine.dispose()


def test_a_connection_closed_while_idle_is_replaced_before_use(postgres_url, monkeypatch):
    monkeypatch.setattr(database, "PING_AFTER_IDLE_SECONDS", 0.0)
    engine = create_database_engine(postgres_url)
    first = _backend_of(engine)
    admin = create_database_engine(postgres_url)
    with admin.connect() as connection:
        # What a server restart or an idle timeout does to a pooled connection.
        assert connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first}).scalar_one()
    admin.dispose()
    # The call does not fail: the idle connection is found closed and a fresh one used.
    assert _backend_of(engine) != first
    engine.dispose()
