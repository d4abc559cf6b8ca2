"""Long-term memory benchmark (issue: long-term memory).

The ten LoCoMo conversations are replayed turn by turn into group sessions of one
SQLite database; after every stored turn the offloader checks its triggers (8 turns /
6,000 characters / 20 steps, as shipped), and each conversation's end flushes what is
pending. Distillation uses the offline rule distiller (the test distiller: no model).
Reported per conversation: turns, offloads, items stored, de-duplication rate, and
recall over the finished database: latency p50/p99 of `/recall` (5 hits, memory items
and messages), and self-recall@5 (a turn's text as the query finds that turn, as a message
or as the item distilled from it). The last row sums up, with the storage the database uses.

Run: .venv/bin/python bench/memory_offload.py
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import locomo_files, locomo_turns, markdown_table, percentile  # noqa: E402
from bot.config import MemorySettings, load_settings  # noqa: E402
from bot.memory import Offloader, RuleDistiller  # noqa: E402
from bot.memory.recall import Recall  # noqa: E402
from bot.storage import migrate  # noqa: E402
from bot.storage.database import create_database_engine  # noqa: E402
from bot.storage.memory_store import MemoryStore  # noqa: E402
from bot.storage.message_append import NewMessage  # noqa: E402
from bot.storage.models import ChatSession  # noqa: E402
from bot.storage.owners import Owner  # noqa: E402
from bot.storage.stores import Stores  # noqa: E402
from transcript import count_tokens  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
QUERIES_PER_CONVERSATION = 100
RECALL_HITS = 5


def turn_text(turn: dict[str, Any]) -> str:
    caption = f" [shares a photo: {turn['caption']}]" if turn.get("caption") else ""
    return f"{turn['text']}{caption}"


async def offload_conversation(
    stores: Stores, offloader: Offloader, path: Path
) -> tuple[ChatSession, dict[str, Any], list[tuple[int, str]]]:
    session = stores.sessions.create_session("group", "group", f"locomo:{path.stem}", "ada")
    turns: list[tuple[int, str]] = []
    offloads = distilled = written = merged = deduped = 0
    started = time.perf_counter()
    for turn in locomo_turns(path):
        text = turn_text(turn)
        if not text.strip():
            continue
        stored = stores.messages.append(
            session.id,
            NewMessage(
                role="user", content=text, token_count=count_tokens(text), sender_name=turn["speaker"]
            ),
        )
        turns.append((stored.seq, text))
        result = await offloader.offload(session)
        if result is None:
            continue
        offloads += 1
        distilled += result.distilled
        written, merged, deduped = written + result.written, merged + result.merged, deduped + result.deduped
    final = await offloader.offload(session, force=True)
    if final is not None:
        offloads += 1
        distilled += final.distilled
        written, merged, deduped = written + final.written, merged + final.merged, deduped + final.deduped
    elapsed = time.perf_counter() - started
    repeats = merged + deduped
    row = {
        "conversation": path.stem,
        "turns": len(turns),
        "offloads": offloads,
        "items stored": written,
        "merged": merged,
        "deduped": deduped,
        "dedup rate": repeats / (written + repeats) if written + repeats else 0.0,
        "offload ms/turn": elapsed * 1000 / max(len(turns), 1),
    }
    return session, row, turns


def measure_recall(
    recall: Recall, memory: MemoryStore, session: ChatSession, turns: list[tuple[int, str]], seed: int
) -> tuple[list[float], int, int]:
    owner = Owner.of(session)
    items_by_seq = {item.source_seq for item in memory.all_items(owner)}
    sample = random.Random(seed).sample(turns, min(QUERIES_PER_CONVERSATION, len(turns)))
    latencies: list[float] = []
    found = asked = 0
    for seq, text in sample:
        started = time.perf_counter()
        hits = recall.search(owner, text, RECALL_HITS)
        latencies.append((time.perf_counter() - started) * 1000)
        if seq in items_by_seq:
            asked += 1
            found += any(hit.seq == seq for hit in hits)
    return latencies, found, asked


def storage_bytes(database_file: Path) -> tuple[int, int]:
    """(whole database file, memory items with their full-text index) in bytes."""
    connection = sqlite3.connect(database_file)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        try:
            memory = connection.execute(
                "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name LIKE 'memory_items%' "
                "OR name LIKE 'ix_memory_items%'"
            ).fetchone()[0]
        except sqlite3.OperationalError:  # SQLite built without the dbstat table
            memory = -1
    finally:
        connection.close()
    return database_file.stat().st_size, int(memory)


def main() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as directory:
        database_file = Path(directory) / "memory-bench.db"
        settings = load_settings(
            REPO / "config.yaml",
            {"CHORUS_DATABASE_URL": f"sqlite:///{database_file}", "CHORUS_DATA_DIR": directory},
        )
        memory_settings: MemorySettings = settings.memory
        database = create_database_engine(settings.database_url)
        migrate.upgrade(database)
        stores = Stores.open(database)
        memory = stores.memory
        offloader = Offloader(memory, RuleDistiller(), memory_settings)
        recall = Recall(memory, memory_settings)
        rows: list[dict[str, Any]] = []
        conversations = []
        for path in locomo_files():
            session, row, turns = asyncio.run(offload_conversation(stores, offloader, path))
            rows.append(row)
            conversations.append((session, turns))
        all_latencies: list[float] = []
        found_total = asked_total = 0
        for index, (row, (session, turns)) in enumerate(zip(rows, conversations, strict=True)):
            latencies, found, asked = measure_recall(recall, memory, session, turns, seed=index)
            all_latencies += latencies
            found_total, asked_total = found_total + found, asked_total + asked
            row["recall p50 ms"] = percentile(latencies, 0.5)
            row["recall p99 ms"] = percentile(latencies, 0.99)
            row["self-recall@5"] = found / asked if asked else 0.0
        database.dispose()
        whole, memory_bytes = storage_bytes(database_file)
        written = sum(row["items stored"] for row in rows)
        repeats = sum(row["merged"] + row["deduped"] for row in rows)
        rows.append(
            {
                "conversation": f"all (db {whole / 1_048_576:.1f} MiB, memory {memory_bytes / 1024:.0f} KiB)",
                "turns": sum(row["turns"] for row in rows),
                "offloads": sum(row["offloads"] for row in rows),
                "items stored": written,
                "merged": sum(row["merged"] for row in rows),
                "deduped": sum(row["deduped"] for row in rows),
                "dedup rate": repeats / (written + repeats) if written + repeats else 0.0,
                "offload ms/turn": sum(row["offload ms/turn"] * row["turns"] for row in rows)
                / max(sum(row["turns"] for row in rows), 1),
                "recall p50 ms": percentile(all_latencies, 0.5),
                "recall p99 ms": percentile(all_latencies, 0.99),
                "self-recall@5": found_total / asked_total if asked_total else 0.0,
            }
        )
    print(markdown_table(rows))
    return rows


if __name__ == "__main__":
    main()
