"""What the work after a turn does again of the turn's own work: as little as it can."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.storage.memory_store import MemoryStore
from bot.storage.owners import Owner
from tests.support.runtime import RuntimeFactory, inbound


async def test_context_maintenance_reuses_the_turns_recall_until_memory_changes(
    tmp_path: Path, runtimes: RuntimeFactory
) -> None:
    runtime = runtimes(tmp_path, memory_idle_seconds=0, memory_turns_threshold=2)
    assert runtime.memory is not None
    searches: list[tuple[str, ...]] = []
    full_text = MemoryStore.full_text

    def counting(self: MemoryStore, owner: Any, terms: Any, candidates: int, **window: Any) -> Any:
        searches.append(tuple(terms))
        return full_text(self, owner, terms, candidates, **window)

    MemoryStore.full_text = counting  # type: ignore[method-assign]
    try:
        await runtime.engine.respond(inbound("We decided on the lighthouse trail for the picnic."))
        await runtime.engine.drain()
        # The turn searched for its message; the context maintenance after it did not again.
        assert len(searches) == 1
        await runtime.engine.respond(inbound("We decided to meet at the lighthouse at nine."))
        await runtime.engine.drain()
        assert len(searches) == 2
        # That turn's offload stored items: the next build searches again, memory has changed.
        session = _session(runtime)
        assert runtime.memory.store.count_items(Owner.of(session)) > 0
        await runtime.engine.inspect(session)
        assert len(searches) == 3
    finally:
        MemoryStore.full_text = full_text  # type: ignore[method-assign]


def _session(runtime: Any) -> Any:
    [(session, _)] = runtime.stores.sessions.list_sessions()
    return session
