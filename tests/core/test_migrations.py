"""The Alembic migrations build exactly the schema the models describe."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlmodel import SQLModel

import bot.storage.tables  # noqa: F401
from bot.search_terms import words as search_words
from bot.storage import migrate
from bot.storage.database import create_database_engine
from bot.storage.index_text import INDEX_MESSAGE, message_index_text, owner_token
from bot.storage.memory_store import MemoryStore
from bot.storage.message_append import NewMessage
from bot.storage.models import ChatSession, new_id
from bot.storage.owners import Owner
from bot.storage.stores import Stores


def test_upgrade_to_head_matches_the_models(tmp_path):
    engine = create_database_engine(f"sqlite:///{tmp_path / 'schema.db'}")
    migrate.upgrade(engine)
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    # Full-text index tables are created by hand in migrations and have no model.
    differences = [d for d in differences if not (d[0] == "remove_table" and "fts" in d[1].name)]
    assert differences == []
    assert migrate.current_revision(engine) == migrate.head_revision()
    engine.dispose()


def test_a_second_upgrade_keeps_the_database_at_head_with_its_rows(tmp_path):
    engine = create_database_engine(f"sqlite:///{tmp_path / 'twice.db'}")
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()
    session = _say(Stores.open(engine), "still here")

    migrate.upgrade(engine)

    assert migrate.current_revision(engine) == migrate.head_revision()
    assert [m.content for m in Stores.open(engine).messages.messages(session.id)] == ["still here"]
    engine.dispose()


# What earlier shapes of revision 0003 created, verbatim, as databases migrated by them have it.
# The second shape added a trigger that indexes every message, which the store now does itself.
SECOND_SHAPE_MESSAGE_TRIGGER = (
    "CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages WHEN new.role != 'system' BEGIN "
    "INSERT INTO messages_fts(rowid, owner, content) SELECT new.id, "
    "hex(s.owner_kind || ':' || s.owner_id), new.content FROM sessions s WHERE s.id = new.session_id; END"
)
# The first shape: external-content indexes without the owner column, kept by triggers.
FIRST_SHAPE = [
    statement
    for table, column in (("memory_items", "search_text"), ("messages", "content"))
    for statement in (
        f"CREATE VIRTUAL TABLE {table}_fts USING fts5({column}, content='{table}', content_rowid='id', "
        "tokenize='porter unicode61 remove_diacritics 2')",
        f"CREATE TRIGGER {table}_fts_insert AFTER INSERT ON {table} BEGIN "
        f"INSERT INTO {table}_fts(rowid, {column}) VALUES (new.id, new.{column}); END",
        f"CREATE TRIGGER {table}_fts_delete AFTER DELETE ON {table} BEGIN "
        f"INSERT INTO {table}_fts({table}_fts, rowid, {column}) VALUES ('delete', old.id, old.{column}); END",
        f"CREATE TRIGGER {table}_fts_update AFTER UPDATE OF {column} ON {table} BEGIN "
        f"INSERT INTO {table}_fts({table}_fts, rowid, {column}) VALUES ('delete', old.id, old.{column}); "
        f"INSERT INTO {table}_fts(rowid, {column}) VALUES (new.id, new.{column}); END",
        f"INSERT INTO {table}_fts({table}_fts) VALUES ('rebuild')",
    )
]


ROOT = Path(__file__).resolve().parents[2]
COLUMNS_OF_MESSAGES_FTS = "SELECT name FROM pragma_table_info('messages_fts')"
TRIGGERS = "SELECT name FROM sqlite_master WHERE type = 'trigger'"


def _migrated_to_0003(tmp_path: Path, name: str) -> DatabaseEngine:
    engine = create_database_engine(f"sqlite:///{tmp_path / name}")
    migrate.upgrade(engine, "0003_memory")
    return engine


def _say(stores: Stores, text_: str) -> ChatSession:
    account = stores.identities.account("web", "visitor-1", "Visitor", None)
    session = stores.sessions.private_session(account.person_id, "assistant")
    stores.messages.append(
        session.id, NewMessage(role="user", content=text_, token_count=3, sender_name="Visitor", lane="web")
    )
    return session


# A message as the store wrote it before `messages.kind` (0009): the row and its search row.
_OLD_MESSAGE = text(
    "INSERT INTO messages (session_id, seq, role, content, sender_name, lane, token_count, "
    "attachment_count, status, created_at) VALUES (:session_id, :seq, 'user', :content, 'Visitor', "
    "'web', 3, 0, 'complete', :created_at) RETURNING id"
)


# A session as the store wrote it before `sessions.model_choice` (0021).
_OLD_SESSION = text(
    "INSERT INTO sessions (id, kind, owner_kind, owner_id, persona_id, title, last_seq, document_count, "
    "created_at, updated_at) VALUES (:id, :kind, :owner_kind, :owner_id, :persona_id, '', 0, 0, :at, :at)"
)


def _old_session(
    engine: DatabaseEngine, kind: str, owner_kind: str, owner_id: str, persona_id: str
) -> ChatSession:
    """A session stored the way stores before 0021 did, for databases not migrated that far."""
    session = ChatSession(
        id=new_id(), kind=kind, owner_kind=owner_kind, owner_id=owner_id, persona_id=persona_id
    )
    with engine.begin() as connection:
        connection.execute(
            _OLD_SESSION,
            {
                **session.model_dump(include={"id", "kind", "owner_kind", "owner_id", "persona_id"}),
                "at": datetime.now(UTC),
            },
        )
    return session


def _said_before_kinds(stores: Stores, text_: str) -> ChatSession:
    account = stores.identities.account("web", "visitor-1", "Visitor", None)
    said = datetime.now(UTC)
    session = _old_session(stores.database, "private", "person", account.person_id, "assistant")
    with stores.database.begin() as connection:
        seq = connection.execute(
            text("UPDATE sessions SET last_seq = last_seq + 1 WHERE id = :id RETURNING last_seq"),
            {"id": session.id},
        ).scalar_one()
        message_id = connection.execute(
            _OLD_MESSAGE, {"session_id": session.id, "seq": seq, "content": text_, "created_at": said}
        ).scalar_one()
        owner = owner_token(session.owner_kind, session.owner_id)
        index_text = message_index_text("Visitor", text_, said)
        connection.execute(INDEX_MESSAGE, {"id": message_id, "owner": owner, "content": index_text})
    return session


def _indexed_words(engine: DatabaseEngine) -> list[str]:
    """Every word occurrence in the message index (what a search can match)."""
    with engine.begin() as connection:
        connection.execute(text("CREATE VIRTUAL TABLE words USING fts5vocab(messages_fts, 'instance')"))
        words = [row[0] for row in connection.execute(text("SELECT term FROM words"))]
        connection.execute(text("DROP TABLE words"))
    return words


def test_repair_leaves_each_message_indexed_once_after_the_old_trigger(tmp_path: Path) -> None:
    engine = _migrated_to_0003(tmp_path, "second_shape.db")
    with engine.begin() as connection:
        connection.execute(text(SECOND_SHAPE_MESSAGE_TRIGGER))
    stores = Stores.open(engine)
    _said_before_kinds(stores, "一只袋熊 quokka")
    # The trigger indexed the raw text too: the unspaced run is one word there, and a later
    # change to the store's row (a person joining another) would leave that copy behind.
    assert "一只袋熊" in _indexed_words(engine)

    migrate.upgrade(engine)

    words = _indexed_words(engine)
    assert "一只袋熊" not in words
    assert words.count("熊") == 1 and words.count("quokka") == 1
    session = _say(stores, "两只袋熊")
    assert "两只袋熊" not in _indexed_words(engine)  # no trigger any more
    hits = MemoryStore(engine).full_text(Owner.of(session), search_words("袋熊"), 5)["message"]
    assert len(hits) == 2
    engine.dispose()


def test_repair_rebuilds_the_first_shape_with_owners(tmp_path: Path) -> None:
    # Without an owner column in the index, the store cannot even write a message.
    engine = _migrated_to_0003(tmp_path, "first_shape.db")
    session = _said_before_kinds(Stores.open(engine), "the wombat plan")
    with engine.begin() as connection:
        for index in ("memory_items_fts", "messages_fts"):
            for suffix in ("insert", "delete", "update"):
                connection.execute(text(f"DROP TRIGGER IF EXISTS {index}_{suffix}"))
            connection.execute(text(f"DROP TABLE {index}"))
    with engine.begin() as connection:
        # The first shape's tables, filled from the messages as its migration did.
        for statement in FIRST_SHAPE:
            connection.execute(text(statement))

    migrate.upgrade(engine)

    with engine.connect() as connection:
        columns = [
            row[0] for row in connection.execute(text("SELECT name FROM pragma_table_info('messages_fts')"))
        ]
        triggers = {
            row[0]
            for row in connection.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'"))
        }
    assert columns == ["owner", "content"]
    assert triggers == {"memory_items_fts_insert", "memory_items_fts_delete", "memory_items_fts_update"}
    assert _indexed_words(engine).count("wombat") == 1
    assert MemoryStore(engine).full_text(Owner.of(session), search_words("wombat"), 5)["message"]
    engine.dispose()


def test_repair_leaves_a_current_database_as_it_is(tmp_path: Path) -> None:
    engine = create_database_engine(f"sqlite:///{tmp_path / 'current.db'}")
    migrate.upgrade(engine, "0005_deliveries")
    _said_before_kinds(Stores.open(engine), "一只袋熊")  # as the store wrote it, CJK split into characters
    with engine.connect() as connection:
        before = connection.execute(text("SELECT count(*) FROM messages_fts_idx")).scalar_one()
    migrate.upgrade(engine)
    with engine.connect() as connection:
        after = connection.execute(text("SELECT count(*) FROM messages_fts_idx")).scalar_one()
    assert after == before
    assert _indexed_words(engine).count("熊") == 1
    engine.dispose()


def test_revisions_form_one_chain_named_after_their_files() -> None:
    # `migrate.upgrade` takes the newest file as the head without asking Alembic.
    files = sorted(migrate.VERSIONS_DIR.glob("[0-9][0-9][0-9][0-9]_*.py"))
    assert {path.name for path in migrate.VERSIONS_DIR.glob("*.py")} == {path.name for path in files}
    previous = None
    for path in files:
        source = path.read_text(encoding="utf-8")
        assert f'revision = "{path.stem}"' in source
        assert (f'down_revision = "{previous}"' if previous else "down_revision = None") in source
        previous = path.stem
    assert migrate.head_revision() == previous


def test_a_database_at_head_is_recognised_without_alembic(tmp_path: Path) -> None:
    engine = create_database_engine(f"sqlite:///{tmp_path / 'head.db'}")
    assert migrate.current_revision(engine) is None
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()
    probe = (
        "import sys\n"
        "from bot.storage import migrate\n"
        "from bot.storage.database import create_database_engine\n"
        f"migrate.upgrade(create_database_engine({str(engine.url)!r}))\n"
        "print('alembic' in sys.modules)"
    )
    engine.dispose()
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_the_recall_migration_dates_old_items_and_reindexes_old_messages(tmp_path):
    engine = create_database_engine(f"sqlite:///{tmp_path / 'old.db'}")
    migrate.upgrade(engine, "0003_memory")
    said = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    stores = Stores.open(engine)
    chat = _old_session(engine, "group", "group", "web:g1", "ada")
    with engine.begin() as connection:
        # A message and an item as the release before this migration wrote them.
        connection.execute(
            text(
                "INSERT INTO messages (session_id, seq, role, content, sender_name, token_count, "
                "attachment_count, status, created_at) VALUES (:session, 1, 'user', "
                "'I adopted a puppy yesterday.', 'Caroline', 5, 0, 'complete', :said)"
            ),
            {"session": chat.id, "said": said},
        )
        connection.execute(text("UPDATE sessions SET last_seq = 1"))
        connection.execute(
            text("INSERT INTO messages_fts(rowid, owner, content) SELECT id, 'x', content FROM messages")
        )
        connection.execute(
            text(
                "INSERT INTO memory_items (owner_kind, owner_id, session_id, source_seq, kind, content, "
                "search_text, content_key, importance, source, mentions, created_at, updated_at) VALUES "
                "('group', 'web:g1', :session, 1, 'fact', 'Caroline: I adopted a puppy yesterday.', "
                "'caroline adopted puppy yesterday', 'k', 5, 'rules', 1, :now, :now)"
            ),
            {"session": chat.id, "now": datetime(2026, 1, 1, tzinfo=UTC)},
        )
    migrate.upgrade(engine)
    memory = MemoryStore(engine)
    item = memory.all_items(Owner("group", "web:g1"))[0]
    assert (item.source_seq, item.source_last_seq) == (1, 1)
    assert item.said_at is not None and item.said_at.date().isoformat() == "2023-05-08"
    # The old message is now found by its sender's name and by the day it talks about.
    found = memory.full_text(Owner("group", "web:g1"), ["caroline"], 5)
    assert [hit.seq for hit in found["message"]] == [1]
    assert [hit.id for hit in memory.full_text(Owner("group", "web:g1"), ["d20230507"], 5)["memory"]] == [1]
    new_one = NewMessage(role="user", content="New one.", token_count=1, sender_name="Mel")
    stores.messages.append(chat.id, new_one)
    assert [hit.seq for hit in memory.full_text(Owner("group", "web:g1"), ["mel"], 5)["message"]] == [2]
    engine.dispose()


def test_the_compact_storage_migration_keeps_each_vectors_direction_and_drops_delivered_turns(
    tmp_path: Path,
) -> None:
    import math
    import random
    from array import array

    engine = create_database_engine(f"sqlite:///{tmp_path / 'compact.db'}")
    migrate.upgrade(engine, "0009_message_kind")
    session = _old_session(engine, "private", "person", "p1", "ada")
    # Written as SQL: the stores write the head revision's columns, which 0009 does not have.
    with engine.begin() as connection:
        said = [
            connection.execute(
                text(
                    "INSERT INTO messages (session_id, seq, role, content, token_count, attachment_count, "
                    "status, created_at, kind) VALUES (:session, :seq, 'user', :content, 2, 0, 'complete', "
                    ":at, 'message') RETURNING id"
                ),
                {"session": session.id, "seq": n + 1, "content": f"line {n}", "at": datetime.now(UTC)},
            ).scalar_one()
            for n in range(3)
        ]
    rng = random.Random(7)
    raw = [[rng.gauss(0, 1) for _ in range(384)] for _ in said]
    vectors = [[value / math.sqrt(sum(v * v for v in vector)) for value in vector] for vector in raw]
    with engine.begin() as connection:
        for message_id, vector in zip(said, vectors, strict=True):
            connection.execute(
                text(
                    "INSERT INTO message_embeddings (message_id, owner_kind, owner_id, vector) "
                    "VALUES (:id, 'person', 'p1', :vector)"
                ),
                {"id": message_id, "vector": array("f", vector).tobytes()},
            )
        for message_id, state in zip(said, ("delivered", "open", "recovered"), strict=True):
            connection.execute(
                text(
                    "INSERT INTO deliveries (user_message_id, session_id, ingest_key, lane, chat_id, "
                    "chat_kind, platform_message_id, state, created_at, updated_at) VALUES "
                    "(:id, :session, :key, 'web', 'c', 'private', :key, :state, '2026-01-01', '2026-01-01')"
                ),
                {"id": message_id, "session": session.id, "key": f"k{message_id}", "state": state},
            )

    migrate.upgrade(engine)

    with engine.connect() as connection:
        stored = connection.execute(text("SELECT vector FROM message_embeddings ORDER BY message_id")).all()
        states = connection.execute(text("SELECT state FROM deliveries ORDER BY user_message_id")).all()
    assert [len(row[0]) for row in stored] == [384, 384, 384]
    for row, vector in zip(stored, vectors, strict=True):
        compact = array("b", bytes(row[0]))
        cosine = sum(a * b for a, b in zip(compact, vector, strict=True)) / math.sqrt(
            sum(c * c for c in compact)
        )
        assert cosine > 0.999
    assert [state for (state,) in states] == ["open", "recovered"]
    engine.dispose()


# Rows as releases before 0009_message_kind stored them (role, content), with the kind each
# has afterwards and its content then (None: unchanged).
ROWS_BEFORE_KINDS = [
    ("user", "/persona sage", "message", None),
    ("system", "command: /persona sage", "command", "/persona sage"),
    ("system", "persona switched from ada to sage", "persona_switch", None),
    ("system", "command reply: Switched to Sage.", "command_reply", "Switched to Sage."),
    ("assistant", "command: is what I would type", "message", None),
    ("system", "error: The model could not be reached.", "error", "The model could not be reached."),
    ("system", "Error: not a tag (capital E)", "note", None),
    ("system", "memory item #3 (fact) forgotten by the operator", "note", None),
    ("system", "command_x: not a tag either", "note", None),
]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_kind_migration_names_every_old_row_and_strips_only_the_tags(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'kinds.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    engine = create_database_engine(url)
    migrate.upgrade(engine, "0008_message_search")
    chat = _old_session(engine, "private", "person", "p1", "ada")
    with engine.begin() as connection:
        for seq, (role, content, _, _) in enumerate(ROWS_BEFORE_KINDS, 1):
            connection.execute(
                text(
                    "INSERT INTO messages (session_id, seq, role, content, token_count, attachment_count, "
                    "status, created_at) VALUES (:session, :seq, :role, :content, 0, 0, 'complete', :at)"
                ),
                {"session": chat.id, "seq": seq, "role": role, "content": content, "at": datetime.now(UTC)},
            )

    migrate.upgrade(engine, "0009_message_kind")

    # Read as SQL: the models describe the head revision, which may have more columns.
    with engine.connect() as connection:
        stored = connection.execute(text("SELECT kind, content FROM messages ORDER BY seq")).all()
    expected = [(kind, after or before) for _, before, kind, after in ROWS_BEFORE_KINDS]
    assert [tuple(row) for row in stored] == expected
    # Down again, every row reads as it did.
    _downgrade(engine, "0008_message_search")
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT role, content FROM messages ORDER BY seq")).all()
    assert [tuple(row) for row in rows] == [(role, before) for role, before, _, _ in ROWS_BEFORE_KINDS]
    engine.dispose()


def _downgrade(engine: DatabaseEngine, revision: str) -> None:
    from alembic import command

    config = migrate.alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
