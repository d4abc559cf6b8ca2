"""Which threads run a database's SQL: the event loop's must run none.

Every statement the database engine executes is recorded with the thread that ran it
(SQLAlchemy's `before_cursor_execute` event sees all of them: the store, context
records, memory, deliveries). A statement on the loop's thread would stall every lane
of the process; one on another thread than the database's (`bot.storage.boundary`)
would, on SQLite, write beside the one writer instead of after it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine as DatabaseEngine

from bot.storage.boundary import THREAD_NAME


@dataclass
class SqlThreads:
    """The threads that ran the database's statements while recording."""

    loop_thread: int
    on_loop: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)

    def record(self, _connection: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if threading.get_ident() == self.loop_thread:
            self.on_loop.append(statement)
        else:
            self.elsewhere.append(threading.current_thread().name)


@contextmanager
def sql_threads(database: DatabaseEngine) -> Iterator[SqlThreads]:
    """Record from the calling thread, which is the event loop's in an async test."""
    seen = SqlThreads(loop_thread=threading.get_ident())
    event.listen(database, "before_cursor_execute", seen.record)
    try:
        yield seen
    finally:
        event.remove(database, "before_cursor_execute", seen.record)


def assert_off_the_loop(seen: SqlThreads) -> None:
    """No statement ran on the loop, and every one ran on the database's threads."""
    assert seen.on_loop == [], f"{len(seen.on_loop)} statements on the event loop, first: {seen.on_loop[:3]}"
    # The work did reach the database, on its threads.
    threads = set(seen.elsewhere)
    assert threads and all(name.startswith(THREAD_NAME) for name in threads), threads
