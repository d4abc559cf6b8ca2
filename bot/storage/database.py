"""The database engine: SQLite (WAL) by default, PostgreSQL by URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, create_engine


def create_database_engine(database_url: str) -> Engine:
    """An engine for `database_url`; SQLite files get WAL and a busy timeout."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite":
        if url.drivername == "postgresql":
            url = url.set(drivername="postgresql+psycopg")
        return create_engine(url, pool_pre_ping=True)
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False})
    event.listen(engine, "connect", _configure_sqlite)
    return engine


def _configure_sqlite(connection: Any, _record: Any) -> None:
    cursor = connection.cursor()
    # WAL lets readers run while a turn writes; the busy timeout absorbs short
    # write contention between lanes instead of failing with "database is locked".
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def open_session(engine: Engine) -> Session:
    # Objects stay readable after commit: callers get plain values back.
    return Session(engine, expire_on_commit=False)
