"""Per-session turn locks shared by every process on one PostgreSQL database.

A turn holds `pg_advisory_lock(SESSION_LOCK_CLASS, key(session))` on a
connection of its own for as long as it runs. PostgreSQL releases the lock when
the holder unlocks it or when its connection ends, so a process that dies
(kill -9, a lost machine) can never leave a session locked. Waiting for the lock
happens in the server, awaited on an async connection: the event loop never blocks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import psycopg
from sqlalchemy.engine import make_url

from bot.liveness import ROLE_LOCK_CLASS, SESSION_LOCK_CLASS, lock_key

# Connections a process keeps for turn locks: as many sessions' turns hold or wait
# for their lock at once; more queue in the process (PostgreSQL's max_connections
# is shared by every process).
LOCK_CONNECTIONS = 16
CONNECT_ATTEMPTS = 3
CONNECT_RETRY_SECONDS = 0.1
LOCK = "SELECT pg_advisory_lock(%s, %s)"
UNLOCK = "SELECT pg_advisory_unlock(%s, %s)"
TRY_LOCK = "SELECT pg_try_advisory_lock(%s, %s)"


def dsn_of(database_url: str) -> str:
    """The libpq connection string psycopg takes, from a SQLAlchemy database URL."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


class PostgresSessionLocks:
    """At most `size` sessions hold (or wait for) a lock at once in this process."""

    def __init__(self, database_url: str, size: int) -> None:
        self._dsn = dsn_of(database_url)
        self._slots = asyncio.Semaphore(size)
        self._idle: list[psycopg.AsyncConnection[object]] = []

    @asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[None]:
        key = (SESSION_LOCK_CLASS, lock_key(session_id))
        async with self._slots:
            connection = self._idle.pop() if self._idle else await self._connect()
            try:
                await connection.execute(LOCK, key)
            except BaseException:
                # Cancelled or failed while waiting: the connection's state is unknown,
                # and closing it drops anything it might hold.
                await connection.close()
                raise
            try:
                yield
            finally:
                # The release finishes on its own even if this task is cancelled meanwhile:
                # the connection is never closed under a running statement.
                await asyncio.shield(asyncio.ensure_future(self._release(connection, key)))

    async def _release(self, connection: psycopg.AsyncConnection[object], key: tuple[int, int]) -> None:
        try:
            await connection.execute(UNLOCK, key)
        except (OSError, psycopg.Error):
            # Closing the connection releases the lock as surely as unlocking it.
            with suppress(OSError, psycopg.Error):
                await connection.close()
        else:
            self._idle.append(connection)

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            with suppress(psycopg.Error):
                await connection.close()

    async def _connect(self) -> psycopg.AsyncConnection[object]:
        for _ in range(CONNECT_ATTEMPTS - 1):
            try:
                return await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
            except (OSError, psycopg.OperationalError):
                # A connect can lose its socket under load (seen as FileNotFoundError from
                # the selector); a fresh attempt is cheap next to failing the person's turn.
                await asyncio.sleep(CONNECT_RETRY_SECONDS)
        return await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)


class PostgresRoleLock:
    """A role only one process on the database may play, held until released or the process dies.

    Held on a connection of its own: PostgreSQL drops a session-level advisory lock when
    its connection ends, so a process killed with -9 never keeps a role.
    """

    def __init__(self, database_url: str, name: str) -> None:
        self._dsn = dsn_of(database_url)
        self._key = (ROLE_LOCK_CLASS, lock_key(name))
        self._connection: psycopg.AsyncConnection[object] | None = None

    async def acquire(self) -> bool:
        """Take the role if no other process holds it; never waits for it."""
        if self._connection is not None:
            return True
        connection = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
        cursor = await connection.execute(TRY_LOCK, self._key)
        row = await cursor.fetchone()
        if row is None or not row[0]:
            await connection.close()
            return False
        self._connection = connection
        return True

    async def release(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            # Closing the connection ends its session, and with it the lock.
            with suppress(OSError, psycopg.Error):
                await connection.close()
