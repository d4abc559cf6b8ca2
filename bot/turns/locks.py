"""Per-session turn locks: one turn of a session at a time, sessions in parallel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class SessionLocks:
    """In-process locks keyed by session id, dropped when nobody holds or waits.

    Across several processes the database serialises what matters (sequence
    numbers and idempotency keys are allocated atomically), so two processes can
    never corrupt a transcript; this lock additionally keeps one process's turns
    of a session strictly ordered.
    """

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}

    @asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        self._users[session_id] = self._users.get(session_id, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[session_id] -= 1
            if self._users[session_id] == 0:
                del self._users[session_id]
                del self._locks[session_id]

    def busy(self, session_id: str) -> bool:
        """Whether a turn of this session is running or waiting in this process."""
        return session_id in self._locks

    def active(self) -> int:
        return len(self._locks)
