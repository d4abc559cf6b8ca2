"""The database engine: SQLite (WAL) by default, PostgreSQL by URL."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sqlalchemy import event, exc
from sqlalchemy.engine import Engine as DatabaseEngine
from sqlalchemy.engine import make_url
from sqlmodel import Session, create_engine

# A pooled PostgreSQL connection idle this long is pinged before it is used again: a
# server restart or a network timeout may have closed it meanwhile. One in steady use
# is not pinged: a ping is a round trip, and one before every call was about a seventh
# of a database thread's time under load (bench/scale.py).
PING_AFTER_IDLE_SECONDS = 10.0
_IDLE_SINCE = "chorus_idle_since"


def create_database_engine(database_url: str) -> DatabaseEngine:
    """An engine for `database_url`; SQLite files get WAL and a busy timeout."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite":
        if url.drivername == "postgresql":
            url = url.set(drivername="postgresql+psycopg")
        engine = create_engine(url)
        _ping_when_idle(engine)
        return engine
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False})
    event.listen(engine, "connect", _configure_sqlite)
    return engine


def _ping_when_idle(engine: DatabaseEngine) -> None:
    """Ping a pooled connection before use only if it sat idle for `PING_AFTER_IDLE_SECONDS`."""

    def note_idle(_dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    def ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.pop(_IDLE_SINCE, None)
        if idle_since is None or time.monotonic() - idle_since < PING_AFTER_IDLE_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as error:
            # The pool drops this connection and hands out a fresh one instead.
            raise exc.DisconnectionError("a pooled connection was closed while idle") from error

    event.listen(engine, "checkin", note_idle)
    event.listen(engine, "checkout", ping_if_idle)


def _configure_sqlite(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    # WAL lets readers run while a turn writes; the busy timeout absorbs short
    # write contention between lanes instead of failing with "database is locked".
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def open_session(engine: DatabaseEngine) -> Session:
    # Objects stay readable after commit: callers get plain values back.
    return Session(engine, expire_on_commit=False)
