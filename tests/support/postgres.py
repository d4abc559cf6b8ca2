"""The test PostgreSQL server: whether there is one, and fresh databases on it.

`CHORUS_TEST_POSTGRES_URL` points at a server where the user may create databases
(scripts/test.sh starts one). Every database made here has a unique name, so tests
of several checkouts can share the server.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from tests.support.peers import POSTGRES

ADMIN_URL = os.environ.get("CHORUS_TEST_POSTGRES_URL")


@contextmanager
def fresh_database() -> Iterator[str]:
    """The URL of a new, empty database, dropped (connections and all) afterwards."""
    if not ADMIN_URL:
        POSTGRES.skip()
    name = f"chorus_test_{uuid.uuid4().hex[:12]}"
    admin = _admin_engine(ADMIN_URL)
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def refuse_new_connections(database_url: str) -> None:
    """Make the server turn away new connections to the database; open ones stay."""
    if not ADMIN_URL:
        POSTGRES.skip()
    admin = _admin_engine(ADMIN_URL)
    try:
        with admin.connect() as connection:
            name = make_url(database_url).database
            connection.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
    finally:
        admin.dispose()


def end_lock_holders(database_url: str) -> int:
    """End the server sessions holding advisory locks on the database (a lost connection); how many.

    Those are a process's liveness lock and the conversation locks its turns hold; its
    other connections stay.
    """
    if not ADMIN_URL:
        POSTGRES.skip()
    admin = _admin_engine(ADMIN_URL)
    try:
        with admin.connect() as connection:
            ended = connection.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM (SELECT DISTINCT l.pid FROM pg_locks l"
                    " JOIN pg_database d ON d.oid = l.database"
                    " WHERE l.locktype = 'advisory' AND d.datname = :name) AS holders"
                ),
                {"name": make_url(database_url).database},
            ).all()
    finally:
        admin.dispose()
    return sum(1 for (done,) in ended if done)


def rows_of(database_url: str, query: str) -> list[tuple[object, ...]]:
    """What a query on the database gives, read on a connection of its own."""
    engine = create_engine(make_url(database_url).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(query))]
    finally:
        engine.dispose()


def _admin_engine(admin_url: str) -> Engine:
    url = make_url(admin_url).set(drivername="postgresql+psycopg")
    return create_engine(url, isolation_level="AUTOCOMMIT")
