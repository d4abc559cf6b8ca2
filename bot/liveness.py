"""Which `chorus serve` processes are alive, as the database sees it.

On PostgreSQL each process holds an advisory lock named after its instance id
on a connection of its own for as long as it runs; the server drops the lock
the moment the process or its connection dies, so "can I take that lock?" is an
exact test of whether a turn's owner is gone. SQLite serves one process per
database file: a second `chorus serve` is refused at start (an exclusive lock on
a file next to the database, also released by the kernel when a process dies),
so every owner other than this process is gone.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path
from typing import IO

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.engine import Engine as DatabaseEngine

from bot.errors import ConfigError

# The first key of the two-key advisory locks Chorus takes; the second names the thing.
PROCESS_LOCK_CLASS = 7301
SESSION_LOCK_CLASS = 7302
# Roles one process per database plays at a time (see bot.roles).
ROLE_LOCK_CLASS = 7303


def lock_key(name: str) -> int:
    """A signed 32-bit key for `name`, the same in every process."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4).digest(), "big", signed=True)


class Liveness:
    def __init__(self, database: DatabaseEngine, instance_id: str) -> None:
        self.database = database
        self.instance_id = instance_id
        self._connection: Connection | None = None
        self._lock_file: IO[str] | None = None

    @property
    def shared(self) -> bool:
        """Whether several processes may serve this database."""
        return self.database.dialect.name == "postgresql"

    def start(self) -> None:
        if self.shared:
            self._connection = self.database.connect()
            self._connection.execute(
                text("SELECT pg_advisory_lock(:kind, :key)"),
                {"kind": PROCESS_LOCK_CLASS, "key": lock_key(self.instance_id)},
            )
            self._connection.commit()
            return
        self._lock_file = _lock_sqlite_file(self.database)

    def is_dead(self, owner: str | None) -> bool:
        if owner is None:
            return True
        if owner == self.instance_id:
            return False
        if not self.shared:
            return True
        with self.database.begin() as connection:
            # Transaction-scoped: taken only to test it, released at commit.
            free = connection.execute(
                text("SELECT pg_try_advisory_xact_lock(:kind, :key)"),
                {"kind": PROCESS_LOCK_CLASS, "key": lock_key(owner)},
            ).scalar_one()
        return bool(free)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None


def _lock_sqlite_file(database: DatabaseEngine) -> IO[str] | None:
    path = database.url.database
    if not path or path == ":memory:":
        return None
    lock_path = Path(f"{path}.serve-lock")
    handle = lock_path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise ConfigError(
            f"Another `chorus serve` ({holder}) is already running on the SQLite database {path}. "
            "SQLite serves one process; to run several, use PostgreSQL (see "
            "docs/scaling.md, “Running on several machines”)."
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}")
    handle.flush()
    return handle
