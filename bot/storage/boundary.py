"""Where async code hands blocking database work to threads: the event loop never waits on SQL.

The stores (`bot.storage.stores.Stores`: identities, visitors, sessions, messages, context
records, memory, deliveries) stay synchronous (plain SQLAlchemy, easy to test and to reason
about); async code calls them through the database's boundary:
`await boundary.run(stores.messages.append, session_id, message)`.

- SQLite gets ONE database thread. Every call through the boundary runs there, one
  after another, so writers never contend for the file's lock ("database is locked")
  and calls run in the order they were made.
- PostgreSQL gets as many threads as the connection pool holds connections, so a
  thread never waits for a connection another thread holds.

A call that has started always runs to its end: if the awaiting task is cancelled
meanwhile (a lane stopped listening), it hears of it only once the call finished, so
nothing the caller does next can overtake a write it made. There is one boundary per
database engine (`boundary_for`), whoever builds the stores on top of it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import ParamSpec, TypeVar

from sqlalchemy.engine import Engine as DatabaseEngine

P = ParamSpec("P")
R = TypeVar("R")

THREAD_NAME = "chorus-db"


class DatabaseBoundary:
    def __init__(self, database: DatabaseEngine) -> None:
        self.workers = threads_for(database)
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    async def run(self, call: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """`call(*args, **kwargs)` on a database thread; log records keep the turn's ids."""
        context = contextvars.copy_context()
        future = asyncio.get_running_loop().run_in_executor(
            self._threads(), functools.partial(context.run, call, *args, **kwargs)
        )
        try:
            # shield: cancelling the caller must not cancel a call still queued or running.
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            await _finished(future)
            raise

    def close(self) -> None:
        """Wait for running calls, then end the threads (a later `run` starts new ones)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def _threads(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix=THREAD_NAME)
            return self._executor


def threads_for(database: DatabaseEngine) -> int:
    """One thread for SQLite (a single writer); one per pooled connection otherwise."""
    if database.dialect.name == "sqlite":
        return 1
    size = getattr(database.pool, "size", None)
    return max(1, size()) if callable(size) else 1


_BOUNDARIES: weakref.WeakKeyDictionary[DatabaseEngine, DatabaseBoundary] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def boundary_for(database: DatabaseEngine) -> DatabaseBoundary:
    """The one boundary of `database`: every store built on it shares its threads."""
    with _REGISTRY_LOCK:
        found = _BOUNDARIES.get(database)
        if found is None:
            found = _BOUNDARIES[database] = DatabaseBoundary(database)
        return found


async def _finished(future: asyncio.Future[R]) -> None:
    """Wait until `future` is done, however often the waiting task is cancelled meanwhile."""
    while not future.done():
        with suppress(asyncio.CancelledError):
            await asyncio.wait({future})
    if not future.cancelled():
        # Retrieved here: the caller was cancelled and will never look at it.
        future.exception()
