"""Helpers for memory tests: a migrated database, sessions and messages written through the store."""

from __future__ import annotations

from collections.abc import Sequence

from bot.config import MemorySettings
from bot.errors import ProviderUnavailable
from bot.memory import DistilledItem, Offloader, RuleDistiller, SourceBlock
from bot.runtime import Runtime
from bot.storage.memory_store import MemoryStore
from bot.storage.message_append import NewMessage
from bot.storage.models import ChatSession


def exchange(runtime: Runtime, session: ChatSession, user: str, reply: str, *, name: str = "Alice") -> None:
    """One answered turn, stored as the engine stores it."""
    store = runtime.stores.messages
    store.append(session.id, NewMessage(role="user", content=user, token_count=1, sender_name=name))
    store.append(
        session.id,
        NewMessage(role="assistant", content=reply, token_count=1, persona_id="ada", sender_name="Ada"),
    )


def settings(**changes: object) -> MemorySettings:
    return MemorySettings(**{"idle_seconds": 0, **changes})  # type: ignore[arg-type]


def offloader(runtime: Runtime, distiller: object | None = None, **changes: object) -> Offloader:
    return Offloader(MemoryStore(runtime.database), distiller or RuleDistiller(), settings(**changes))  # type: ignore[arg-type]


class FlakyDistiller:
    """The rules, but the first `failures` calls fail like an unreachable model; records every call."""

    name = "flaky"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[list[int]] = []

    async def distill(
        self,
        blocks: Sequence[SourceBlock],
        max_items: int,
        session: object = None,
        known: object = (),
        prefix: object = None,
    ) -> list[DistilledItem]:
        self.calls.append([block.seq for block in blocks])
        if self.failures > 0:
            self.failures -= 1
            raise ProviderUnavailable("The model could not be reached.")
        return await RuleDistiller().distill(blocks, max_items)
