"""Per-session turn locks: one turn of a session at a time, sessions in parallel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol


class SharedLocks(Protocol):
    """A lock per session that every process on the database respects."""

    def hold(self, session_id: str) -> AbstractAsyncContextManager[None]: ...

    async def aclose(self) -> None: ...


class SessionLocks:
    """In-process locks keyed by session id, dropped when nobody holds or waits.

    With several processes on one PostgreSQL database, `shared` (a database lock
    per session) is taken too, once this process's own turn is next: then a reply
    is always stored right after the question it answers, whichever process took
    each message. Sequence numbers and idempotency keys are allocated atomically
    in any case, so processes can never corrupt a transcript.
    """

    def __init__(self, shared: SharedLocks | None = None) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}
        self.shared = shared

    @asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        self._users[session_id] = self._users.get(session_id, 0) + 1
        try:
            async with lock:
                if self.shared is None:
                    yield
                else:
                    async with self.shared.hold(session_id):
                        yield
        finally:
            self._users[session_id] -= 1
            if self._users[session_id] == 0:
                del self._users[session_id]
                del self._locks[session_id]

    def busy(self, session_id: str) -> bool:
        """Whether a turn of this session may have run since it was read: one is running
        or waiting in this process, or other processes share the session."""
        return session_id in self._locks or self.shared is not None

    def active(self) -> int:
        return len(self._locks)
