"""Core benchmarks (issue: core runtime).

(a) load the window from SQLite and build the context for sessions of 100, 10,000 and
    100,000 stored messages — time must not grow with history (target < 2 ms);
(b) the seed-000 window beside langchain-core's `trim_messages` with the same tiktoken counter;
(c) turns through the engine with the demo provider: turns/s, p50/p99, peak RSS
    (targets: engine overhead p50 < 5 ms per turn, RSS < 150 MB), run in a fresh process.

Run: .venv/bin/python bench/core.py
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    locomo_files,
    locomo_turns,
    markdown_table,
    median,
    peak_rss_mb,
    percentile,
)
from bot.config import load_settings  # noqa: E402
from bot.runtime import build_runtime  # noqa: E402
from bot.storage.database import open_session  # noqa: E402
from bot.storage.index_text import INDEX_MESSAGE, message_index_text, owner_token  # noqa: E402
from bot.storage.models import ChatSession, Message  # noqa: E402
from bot.turns.inbound import Actor, InboundMessage  # noqa: E402
from transcript import Budget, Capabilities, build_context, count_tokens  # noqa: E402

HISTORY_SIZES = (100, 10_000, 100_000)
SAMPLE_TEXTS = [
    "Could you remind me what we decided about the release date for the mobile app?",
    "We agreed to ship on the 12th, after the QA pass, and to keep the old API alive for a month.",
    "Great. Also, the invoice INV-2291 still shows 42 EUR — is that the final total?",
    "Yes, 42 EUR is final; the discount was already applied in the previous invoice.",
]


def settings_for(directory: Path, *, memory: bool = True):
    return load_settings(
        Path(__file__).resolve().parents[1] / "config.yaml",
        {
            "CHORUS_DATABASE_URL": f"sqlite:///{directory / 'bench.db'}",
            "CHORUS_DATA_DIR": str(directory / "data"),
            "CHORUS_MEMORY_ENABLED": "true" if memory else "false",
            # As the default install (no dense extra) runs, unless asked: with the extra
            # installed, dense recall would otherwise load its encoder here.
            "CHORUS_MEMORY_DENSE": os.environ.get("CHORUS_MEMORY_DENSE", "false"),
        },
    )


def realistic_texts() -> list[str]:
    """Every turn of the ten LoCoMo conversations: real wording, real lengths."""
    return [turn["text"] for path in locomo_files() for turn in locomo_turns(path) if turn["text"].strip()]


def populate(runtime, size: int, texts: list[str], owner: str) -> ChatSession:
    """A session with `size` stored messages (real conversation text, cycled), inserted in bulk."""
    session = runtime.stores.sessions.create_session("private", "person", owner, "ada")
    now = datetime.now(UTC)
    rows = []
    for seq in range(1, size + 1):
        text = texts[(seq - 1) % len(texts)]
        assistant = seq % 2 == 0
        rows.append(
            Message(
                session_id=session.id,
                seq=seq,
                role="assistant" if assistant else "user",
                content=text,
                persona_id="ada" if assistant else None,
                sender_name=None if assistant else "Alice",
                token_count=count_tokens(text),
                created_at=now,
            )
        )
    with open_session(runtime.database) as db:
        db.add_all(rows)
        stored = db.get(ChatSession, session.id)
        stored.last_seq = size
        db.add(stored)
        db.commit()
        # Bulk rows bypass MessageStore.append, which also writes each message's search row.
        token = owner_token("person", owner)
        db.connection().execute(
            INDEX_MESSAGE,
            [
                {
                    "id": row.id,
                    "owner": token,
                    "content": message_index_text(row.sender_name, row.content, now),
                }
                for row in rows
            ],
        )
        db.commit()
    return runtime.stores.sessions.get_session(session.id)


def bench_context_build(repeats: int = 300, *, memory: bool) -> list[dict[str, Any]]:
    results = []
    texts = realistic_texts()
    with tempfile.TemporaryDirectory() as directory:
        runtime = build_runtime(settings_for(Path(directory), memory=memory))
        engine = runtime.engine
        persona = engine.personas.default
        for size in HISTORY_SIZES:
            # One owner per size, so recall searches exactly this history.
            session = populate(runtime, size, texts, owner=f"bench-{size}")
            for _ in range(20):  # warm caches
                asyncio.run(engine.assembler.assemble(session, persona))
            samples = []
            loop = asyncio.new_event_loop()
            for _ in range(repeats):
                started = time.perf_counter()
                context = loop.run_until_complete(engine.assembler.assemble(session, persona))
                samples.append((time.perf_counter() - started) * 1000)
            loop.close()
            results.append(
                {
                    "memory recall": "on" if memory else "off",
                    "stored messages": f"{size:,}",
                    "messages in context": context.stats.messages_kept,
                    "p50 ms": median(samples),
                    "p99 ms": percentile(samples, 0.99),
                    "target": "< 2 ms" if not memory else "(no target)",
                }
            )
        asyncio.run(runtime.aclose())
    return results


@dataclass(frozen=True)
class BenchPersona:
    id: str = "ada"
    name: str = "Ada"
    system_prompt: str = ""


# No system prompt: trim_messages trims the history alone, so both sides get the same budget.
BENCH_PERSONA = BenchPersona()


def bench_window_vs_langchain(repeats: int = 200) -> list[dict[str, Any]]:
    from langchain_core.messages import AIMessage, HumanMessage, trim_messages

    results = []
    for size in (100, 1_000):
        rows = [
            {"role": "assistant" if i % 2 else "user", "content": SAMPLE_TEXTS[i % len(SAMPLE_TEXTS)]}
            for i in range(size)
        ]
        lc_messages = [
            AIMessage(row["content"]) if row["role"] == "assistant" else HumanMessage(row["content"])
            for row in rows
        ]

        def counter(messages) -> int:
            return sum(count_tokens(m.content) for m in messages)

        budget = 600
        ours, theirs = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            context = build_context(
                rows,
                persona=BENCH_PERSONA,
                budget=Budget(max_messages=size, max_tokens=budget),
                capabilities=Capabilities(),
            )
            ours.append((time.perf_counter() - started) * 1000)
            kept = context.stats.messages_kept
            started = time.perf_counter()
            trimmed = trim_messages(
                lc_messages, max_tokens=budget, token_counter=counter, strategy="last", start_on="human"
            )
            theirs.append((time.perf_counter() - started) * 1000)
        results.append(
            {
                "rows": f"{size:,}",
                "kept (ours / langchain)": f"{kept} / {len(trimmed)}",
                "build_context p50 ms": median(ours),
                "trim_messages p50 ms": median(theirs),
                "speed-up": median(theirs) / median(ours),
            }
        )
    return results


async def _engine_turns(turns: int) -> dict[str, Any]:
    texts = realistic_texts()
    with tempfile.TemporaryDirectory() as directory:
        runtime = build_runtime(settings_for(Path(directory)))
        engine = runtime.engine
        samples, background = [], []
        started_all = time.perf_counter()
        for index in range(turns):
            inbound = InboundMessage(
                lane="web",
                platform_message_id=f"b{index}",
                chat_id=f"user{index % 10}",
                chat_kind="private",
                actor=Actor(user_id=f"user{index % 10}", display_name="Bench"),
                text=texts[index % len(texts)],
            )
            started = time.perf_counter()
            reply = await engine.respond(inbound)
            replied = time.perf_counter()
            # After-turn work (memory offload, compaction) runs once the reply is out;
            # it is timed on its own so the user's wait is not mixed with it.
            await engine.drain()
            samples.append((replied - started) * 1000)
            background.append((time.perf_counter() - replied) * 1000)
            assert reply.kind == "assistant", reply
        elapsed = time.perf_counter() - started_all
        await runtime.aclose()
    return {
        "turns": turns,
        "turns/s (with after-turn work)": turns / elapsed,
        "reply p50 ms": median(samples),
        "reply p99 ms": percentile(samples, 0.99),
        "after-turn p50 ms": median(background),
        "after-turn p99 ms": percentile(background, 0.99),
        "peak RSS MB": peak_rss_mb(),
        "targets": "reply p50 < 5 ms, RSS < 150 MB",
    }


def bench_engine(turns: int = 2000) -> list[dict[str, Any]]:
    """Runs in a fresh interpreter so peak RSS is the engine's, not the other benchmarks'."""
    output = subprocess.run(
        [sys.executable, __file__, "--engine-only", str(turns)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [json.loads(output.strip().splitlines()[-1])]


def main() -> list[dict[str, Any]]:
    sections = [
        ("(a) window load + context build from SQLite", bench_context_build(memory=False)),
        ("(a') the same plus memory snapshot and full-text recall", bench_context_build(memory=True)),
        ("(b) build_context vs langchain-core trim_messages, same counter", bench_window_vs_langchain()),
        ("(c) turns through the engine, demo provider", bench_engine()),
    ]
    rows: list[dict[str, Any]] = []
    for title, table in sections:
        print(f"\n### {title}\n")
        print(markdown_table(table))
        rows.extend({"section": title, **row} for row in table)
    return rows


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--engine-only":
        print(json.dumps(asyncio.run(_engine_turns(int(sys.argv[2])))))
    else:
        main()
