"""Roles only one process per database may play at a time, such as polling Telegram for a bot.

Telegram hands a bot's updates to one `getUpdates` caller: a second poller would
take updates from the first. On PostgreSQL, where several `chorus serve`
processes share the database, a role is a session-level advisory lock held for
as long as the process plays it (the server drops it when the process dies). On
SQLite a second `chorus serve` on the same file is refused at start (see
`bot.liveness`), so the one process there plays every role.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # psycopg is installed with the `postgres` extra only.
    from bot.storage.advisory_locks import PostgresRoleLock


class ProcessRoles:
    def __init__(self, database_url: str, shared: bool) -> None:
        self._database_url = database_url
        self._shared = shared
        self._held: dict[str, PostgresRoleLock] = {}

    async def claim(self, name: str) -> bool:
        """Play role `name` from now on; False when another process plays it."""
        if not self._shared or name in self._held:
            return True
        from bot.storage.advisory_locks import PostgresRoleLock

        lock = PostgresRoleLock(self._database_url, name)
        if not await lock.acquire():
            return False
        self._held[name] = lock
        return True

    async def release(self, name: str) -> None:
        lock = self._held.pop(name, None)
        if lock is not None:
            await lock.release()

    async def aclose(self) -> None:
        for name in list(self._held):
            await self.release(name)
