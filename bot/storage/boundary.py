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
import atexit
import contextvars
import functools
import queue
import threading
import weakref
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from sqlalchemy.engine import Engine as DatabaseEngine

P = ParamSpec("P")
R = TypeVar("R")

THREAD_NAME = "chorus-db"


@dataclass(eq=False)
class _Call:
    """One call handed to the database threads, and how its caller hears it finished."""

    loop: asyncio.AbstractEventLoop
    run: Callable[[], Any]
    result: asyncio.Future[Any]
    finished: bool = False
    # Made only when the caller was cancelled and waits for the call to end.
    ended: asyncio.Future[None] | None = field(default=None)


class DatabaseBoundary:
    """The database's threads, and `run` to hand them a call.

    Its own small pool rather than `loop.run_in_executor`: every database call of a turn
    crosses here (several per tool round), and the executor's concurrent future, chained
    to an asyncio future and shielded, cost about as much CPU on the event loop as a
    one-row insert costs SQLite. Here a call is one queue item and one future, settled
    on the loop by the thread that ran it.
    """

    def __init__(self, database: DatabaseEngine) -> None:
        self.workers = threads_for(database)
        self._calls: queue.SimpleQueue[_Call | None] | None = None
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        # Threads still running at exit finish the calls they hold first (as an executor's do).
        atexit.register(_close_at_exit, weakref.ref(self))

    async def run(self, call: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """`call(*args, **kwargs)` on a database thread; log records keep the turn's ids."""
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        handed = _Call(loop, functools.partial(context.run, call, *args, **kwargs), loop.create_future())
        self._queue().put(handed)
        try:
            return await handed.result  # type: ignore[no-any-return]
        except asyncio.CancelledError:
            # The caller was cancelled: it hears of it only once the call ended, so
            # nothing it does next can overtake a write it made.
            if not handed.finished:
                handed.ended = loop.create_future()
                await _finished(handed.ended)
            elif not handed.result.cancelled():
                # It ended just before the cancellation: its error, if any, is never looked at.
                handed.result.exception()
            raise

    def close(self) -> None:
        """Wait for running and queued calls, then end the threads (a later `run` starts new ones)."""
        with self._lock:
            calls, threads = self._calls, self._threads
            self._calls, self._threads = None, []
        if calls is None:
            return
        for _ in threads:
            calls.put(None)
        for thread in threads:
            thread.join()

    def _queue(self) -> queue.SimpleQueue[_Call | None]:
        with self._lock:
            if self._calls is None:
                self._calls = queue.SimpleQueue()
                self._threads = [
                    threading.Thread(
                        target=_work, args=(self._calls,), name=f"{THREAD_NAME}_{number}", daemon=True
                    )
                    for number in range(self.workers)
                ]
                for thread in self._threads:
                    thread.start()
            return self._calls


def _work(calls: queue.SimpleQueue[_Call | None]) -> None:
    while (handed := calls.get()) is not None:
        try:
            outcome: tuple[Any, BaseException | None] = (handed.run(), None)
        except BaseException as error:  # noqa: BLE001 - every failure goes back to the caller
            outcome = (None, error)
        # A loop closed meanwhile has no caller left to tell.
        with suppress(RuntimeError):
            handed.loop.call_soon_threadsafe(_settle, handed, *outcome)


def _settle(handed: _Call, value: Any, error: BaseException | None) -> None:
    """On the caller's loop: the call ended; its caller gets the outcome unless it was cancelled."""
    handed.finished = True
    if handed.ended is not None and not handed.ended.done():
        handed.ended.set_result(None)
    if handed.result.done():
        return
    if error is not None:
        handed.result.set_exception(error)
    else:
        handed.result.set_result(value)


def _close_at_exit(boundary: weakref.ref[DatabaseBoundary]) -> None:
    found = boundary()
    if found is not None:
        found.close()


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


async def _finished(ended: asyncio.Future[None]) -> None:
    """Wait until `ended` is done, however often the waiting task is cancelled meanwhile."""
    while not ended.done():
        with suppress(asyncio.CancelledError):
            await asyncio.wait({ended})
