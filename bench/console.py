"""Console benchmark: how long the operator's pages take to gather on a busy database.

The console reads more than a turn does (every session for the list, every record of a
conversation, a replay of each past turn for the context chart), so it is measured apart:
the conversation list over many sessions, a long transcript, and the tokens-per-turn replay
over the chart's maximum of turns. Demo model, SQLite, memory off.

Run: .venv/bin/python bench/console.py [--sessions N] [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import markdown_table, median, percentile  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.console import CHART_TURNS, Console  # noqa: E402
from bot.runtime import build_runtime  # noqa: E402
from bot.turns.inbound import Actor, InboundMessage  # noqa: E402

REPEATS = 20


def message(index: int, user: str, text: str) -> InboundMessage:
    return InboundMessage(
        lane="web",
        platform_message_id=f"c{index}",
        chat_id=user,
        chat_kind="private",
        actor=Actor(user_id=user, display_name=user.title()),
        text=text,
    )


async def timed(work: Callable[[], Awaitable[Any]]) -> dict[str, float]:
    samples = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        await work()
        samples.append((time.perf_counter() - started) * 1000)
    return {"p50 ms": median(samples), "p99 ms": percentile(samples, 0.99)}


async def measure(sessions: int, turns: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        settings = load_settings(
            Path(__file__).resolve().parents[1] / "config.yaml",
            {
                "CHORUS_DATABASE_URL": f"sqlite:///{root / 'console.db'}",
                "CHORUS_DATA_DIR": str(root / "data"),
                "CHORUS_MEMORY_ENABLED": "false",
                "CHORUS_MODEL_CONTEXT_WINDOW": "4000",
            },
        )
        runtime = build_runtime(settings)
        index = 0
        for number in range(sessions):
            index += 1
            await runtime.engine.respond(message(index, f"visitor{number}", f"hello from visitor {number}"))
        long_session = ""
        for number in range(turns):
            index += 1
            words = " ".join(f"note{number}-{part}" for part in range(30))
            reply = await runtime.engine.respond(message(index, "regular", f"Turn {number}: {words}"))
            long_session = reply.session_id or ""
            await runtime.engine.drain()
        console = Console(runtime)
        stored = len(runtime.stores.messages.messages(long_session))
        session = runtime.stores.sessions.get_session(long_session)
        assert session is not None
        rows = [
            {"page": f"conversation list ({sessions + 1} sessions)", **await timed(console.conversations)},
            {
                "page": "conversation search (message text)",
                **await timed(lambda: console.conversations("turn 42")),
            },
            {"page": f"transcript ({stored} rows)", **await timed(lambda: console.transcript(long_session))},
            {
                "page": f"tokens-per-turn replay ({min(turns, CHART_TURNS)} turns)",
                **await timed(lambda: runtime.engine.db.run(console.turn_history, session)),
            },
        ]
        await runtime.aclose()
        return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=CHART_TURNS)
    args = parser.parse_args(argv if argv is not None else [])
    rows = asyncio.run(measure(args.sessions, args.turns))
    print(markdown_table(rows))
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
