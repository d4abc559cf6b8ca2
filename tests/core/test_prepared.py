"""Prepared statements (`bot.storage.prepared`) behave as SQLAlchemy's own execution does:
the same stored values, SQLAlchemy's errors, listeners that see them, and no statement
that would need SQLAlchemy's work at execution time; and the rows an append stores together
commit all or none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    insert,
    select,
)
from sqlalchemy.exc import IntegrityError

from bot.storage.message_append import INSERT_MESSAGE, MESSAGES, NewMessage
from bot.storage.prepared import Prepared
from transcript.kinds import UnknownMessageKind


def _message(session_id: str, seq: int, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "seq": seq,
        "role": "user",
        "content": "Zürich 🌧",
        "sender_name": "Ada",
        "token_count": 3,
        "attachment_count": 0,
        "status": "complete",
        "kind": "message",
        # Not UTC: the column type's bind processor must turn it into UTC as SQLAlchemy does.
        "created_at": datetime(2026, 12, 2, 9, 30, 15, 123456, tzinfo=timezone(timedelta(hours=2))),
        **fields,
    }


def _session_of(runtime: Any) -> str:
    account = runtime.stores.identities.account("web", "u1", "Ada", None)
    return str(runtime.stores.sessions.private_session(account.person_id, "ada").id)


async def test_a_prepared_insert_stores_what_sqlalchemy_would(
    database: dict[str, str], runtimes, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, **database)
    session_id = _session_of(runtime)
    with runtime.database.begin() as connection:
        ((prepared_id,),) = INSERT_MESSAGE.execute(connection, _message(session_id, 1001))
        core_id = connection.execute(
            insert(MESSAGES).returning(MESSAGES.c.id), _message(session_id, 1002)
        ).scalar_one()
    with runtime.database.connect() as connection:
        # As the driver gives them back, untouched by the column types: what is stored.
        stored = {row.id: row._asdict() for row in connection.exec_driver_sql("SELECT * FROM messages")}
    prepared, core = stored[prepared_id], stored[core_id]
    assert (prepared.pop("seq"), core.pop("seq")) == (1001, 1002)
    del prepared["id"], core["id"]
    assert prepared == core
    with runtime.database.connect() as connection:
        written_at = connection.execute(select(MESSAGES.c.created_at).where(MESSAGES.c.id == prepared_id))
        assert written_at.scalar_one() == datetime(2026, 12, 2, 7, 30, 15, 123456, tzinfo=UTC)


async def test_a_failed_prepared_statement_raises_sqlalchemys_error_and_stores_nothing(
    database: dict[str, str], runtimes, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, **database)
    session_id = _session_of(runtime)
    with runtime.database.begin() as connection:
        INSERT_MESSAGE.execute(connection, _message(session_id, 2001, ingest_key="web:c:m1"))
    with pytest.raises(IntegrityError), runtime.database.begin() as connection:
        INSERT_MESSAGE.execute(connection, _message(session_id, 2002))
        INSERT_MESSAGE.execute(connection, _message(session_id, 2003, ingest_key="web:c:m1"))
    with runtime.database.connect() as connection:
        seqs = connection.execute(select(MESSAGES.c.seq).where(MESSAGES.c.session_id == session_id)).scalars()
        # The whole transaction was rolled back, the statement before the failing one too.
        assert sorted(seqs) == [2001]


async def test_cursor_listeners_see_prepared_statements(runtimes, tmp_path: Path) -> None:
    runtime = runtimes(tmp_path)
    session_id = _session_of(runtime)
    seen: list[str] = []

    def record(_connection: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        seen.append(statement)

    event.listen(runtime.database, "before_cursor_execute", record)
    try:
        with runtime.database.begin() as connection:
            INSERT_MESSAGE.execute(connection, _message(session_id, 3001))
    finally:
        event.remove(runtime.database, "before_cursor_execute", record)
    assert [statement.split()[:3] for statement in seen] == [["INSERT", "INTO", "messages"]]


def test_a_statement_that_needs_column_defaults_filled_in_is_refused() -> None:
    table = Table(
        "notes",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("text", String),
        Column("written_at", DateTime, default=datetime.now),
    )
    engine = create_engine("sqlite://")
    table.metadata.create_all(engine)
    with engine.begin() as connection, pytest.raises(ValueError, match="column defaults"):
        Prepared(insert(table)).execute(connection, {"text": "hello"})
    with engine.begin() as connection:
        # Given the value, nothing is left for SQLAlchemy to fill in.
        Prepared(insert(table)).execute(connection, {"text": "hello", "written_at": datetime(2026, 1, 1)})
        assert connection.execute(select(table.c.text, table.c.written_at)).all() == [
            ("hello", datetime(2026, 1, 1))
        ]


async def test_rows_appended_together_are_stored_all_or_none(
    database: dict[str, str], runtimes, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, **database)
    session_id = _session_of(runtime)
    messages = runtime.stores.messages
    asked = NewMessage(role="user", content="first", token_count=1)
    stored = messages.append_all(
        session_id, [asked, NewMessage(role="assistant", content="second", token_count=1)]
    )
    assert [(row.seq, row.content) for row in stored] == [(1, "first"), (2, "second")]

    with pytest.raises(UnknownMessageKind):
        messages.append_all(
            session_id, [asked, NewMessage(role="user", content="x", token_count=1, kind="tool_call")]
        )
    assert [row.content for row in messages.messages(session_id)] == ["first", "second"]
    # The failed pair took no sequence number either.
    assert messages.append(session_id, asked).seq == 3
    with pytest.raises(ValueError, match="one at a time"):
        messages.append_all(
            session_id,
            [
                NewMessage(
                    role="user",
                    content="y",
                    token_count=1,
                    lane="web",
                    platform_chat_id="c",
                    platform_message_id="m",
                )
            ],
        )
