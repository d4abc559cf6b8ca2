"""Rows stored before dense recall was on get their embeddings afterwards.

Needs the `dense` extra's model (skipped without it, like test_dense.py).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.memory.backfill import BackfillResult, backfill_embeddings
from bot.memory.dense import Embedder
from bot.runtime import Runtime
from bot.storage.memory_store import MemoryStore
from bot.storage.owners import Owner
from tests.support.peers import needs_dense_model
from tests.support.runtime import RuntimeFactory, inbound, make_runtime, make_settings
from tests.support.sql_threads import assert_off_the_loop, sql_threads

pytestmark = needs_dense_model

GROUP = {"chat_id": "g7", "chat_kind": "group"}
OWNER = Owner("group", "web:g7")
LINES = [
    ("Melanie", "I signed up for taekwondo classes, the kicks are brutal."),
    ("Caroline", "The bakery on the corner sells sourdough now."),
] + [("Eli", f"Reminder {n}: the printer on floor {n} is out of toner.") for n in range(18)]


async def stored_without_vectors(tmp_path: Path, **database: str) -> None:
    """Twenty group messages, offloaded into items, with dense recall off."""
    runtime: Runtime = make_runtime(tmp_path, memory_idle_seconds=0, memory_dense=False, **database)
    try:
        for name, text in LINES:
            await runtime.engine.record(inbound(text, user_id=name.lower(), display_name=name, **GROUP))
        await runtime.engine.drain()
        memory = MemoryStore(runtime.database)
        assert memory.all_items(OWNER) and all(item.embedding is None for item in memory.all_items(OWNER))
        assert memory.vector_counts(OWNER) == {"memory": (0, 0), "message": (0, 0)}
    finally:
        await runtime.aclose()


async def test_backfill_embeds_old_rows_and_a_cached_index_sees_them(tmp_path: Path) -> None:
    await stored_without_vectors(tmp_path)
    runtime: Runtime = make_runtime(tmp_path, memory_idle_seconds=0, memory_dense=True)
    try:
        assert runtime.memory is not None
        recall = runtime.memory.recall
        # Newer messages are embedded by the offload as usual, with higher ids than the old rows.
        for n in range(20):
            text = f"Parking note {n}: level {n} is full."
            await runtime.engine.record(inbound(text, user_id="eli", display_name="Eli", **GROUP))
        await runtime.engine.drain()
        memory = MemoryStore(runtime.database)
        embedded = memory.vector_counts(OWNER)
        question = "Which martial arts are practised here?"
        # Not found yet; the dense index now caches the owner's matrices of the newer rows.
        assert not any("taekwondo" in hit.text for hit in recall.search(OWNER, question, 1))
        items = len(memory.all_items(OWNER)) - embedded["memory"][0]

        assert runtime.memory.embedder is not None
        result = backfill_embeddings(memory, runtime.memory.embedder, batch=7)

        assert (result.items, result.messages) == (items, len(LINES))
        assert memory.vector_counts(OWNER)["message"][0] == len(LINES) + 20
        assert all(item.embedding is not None for item in memory.all_items(OWNER))
        assert "taekwondo" in recall.search(OWNER, question, 1)[0].text
        # Nothing is left to do, and nothing is embedded twice.
        assert backfill_embeddings(memory, recall.dense.embedder) == BackfillResult(0, 0)  # type: ignore[union-attr]
    finally:
        await runtime.aclose()


@dataclass
class ThreadsOfEmbedder:
    """The embedder, noting the thread of each batch it embeds."""

    inner: Embedder
    threads: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.inner.name

    def embed(self, texts: Sequence[str]) -> Any:
        self.threads.append(threading.current_thread().name)
        return self.inner.embed(texts)


async def test_serve_start_runs_the_backfill_in_the_background(
    database: dict[str, str], tmp_path: Path, runtimes: RuntimeFactory
) -> None:
    await stored_without_vectors(tmp_path, **database)
    runtime = runtimes(tmp_path, memory_idle_seconds=0, memory_dense=True, **database)
    assert runtime.memory is not None and runtime.memory.embedder is not None
    embedder = runtime.memory.embedder = ThreadsOfEmbedder(runtime.memory.embedder)
    with sql_threads(runtime.database) as seen:
        task = runtime.memory.start_backfill()
        assert task is not None
        result = await task
    assert result is not None and result.messages == len(LINES)
    assert runtime.memory.start_backfill() is task  # one pass per process
    # Reads and writes go through the database's thread (SQLite's one writer), never the
    # loop's or the embedding thread's; the model runs on the embedding thread only.
    assert_off_the_loop(seen)
    assert embedder.threads and {name.split("_")[0] for name in embedder.threads} == {"chorus-embed"}
    memory = MemoryStore(runtime.database)
    assert memory.vector_counts(OWNER)["message"][0] == len(LINES)
    assert all(item.embedding is not None for item in memory.all_items(OWNER))


async def test_memory_reindex_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    await stored_without_vectors(tmp_path)
    settings = make_settings(tmp_path)
    monkeypatch.setenv("CHORUS_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("CHORUS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CHORUS_MEMORY_DENSE", "true")
    assert main(["memory", "reindex"]) == 0
    assert f"and {len(LINES)} messages" in capsys.readouterr().out
    monkeypatch.setenv("CHORUS_MEMORY_DENSE", "false")
    assert main(["memory", "reindex"]) == 2
    assert "dense recall is off" in capsys.readouterr().err
