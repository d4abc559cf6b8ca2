"""Context management benchmark: the ten LoCoMo conversations replayed in a small window.

Each conversation is one group session; its two speakers are two users talking to
the bot, and every turn goes through the real `TurnEngine` (storage, assembly,
compaction, collapse, overflow recovery). The model is `WindowedModel`, an
in-process provider behind the normal provider interface: it rejects any request
larger than its window (as a real server would) and writes deterministic
extractive summaries. Reported per conversation: the largest request sent against
the window, compactions, collapses, overflow recoveries, errors reaching users,
and context-management time per turn (background work included).

Run: .venv/bin/python bench/context_replay.py [--conversations N] [--turns N] [--window 4000]
         [--compact-share 0.95 --collapse-share 0.6]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import locomo_files, locomo_turns, markdown_table, percentile  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.errors import ContextOverflowError  # noqa: E402
from bot.providers.base import (  # noqa: E402
    SUMMARY_PURPOSE,
    ChatRequest,
    Finish,
    ModelEvent,
    TextDelta,
    collect_text,
)
from bot.runtime import build_runtime  # noqa: E402
from bot.turns.events import Reply  # noqa: E402
from bot.turns.inbound import Actor, InboundMessage  # noqa: E402
from transcript import count_message_tokens, count_tokens, extract_identifiers, truncate_to_tokens  # noqa: E402

REPO_CONFIG = Path(__file__).resolve().parents[1] / "config.yaml"
DEFAULT_WINDOW = 4000
_FIRST_SENTENCE = re.compile(r"^.*?[.!?](?=\s|$)", re.DOTALL)


class WindowedModel:
    """A model with a hard context window and an extractive summariser."""

    name = "windowed-test-model"

    def __init__(self, window: int) -> None:
        self.window = window
        self.largest_request = 0
        self.chat_requests = 0
        self.rejected = 0

    async def stream(self, request: ChatRequest) -> AsyncIterator[ModelEvent]:
        tokens = sum(count_message_tokens(message) for message in request.messages)
        if tokens + (request.max_tokens or 0) > self.window:
            self.rejected += 1
            raise ContextOverflowError(f"request of {tokens} tokens exceeds the {self.window}-token window")
        if request.purpose == SUMMARY_PURPOSE:
            yield TextDelta(summarise(request))
            yield Finish("stop")
            return
        self.chat_requests += 1
        self.largest_request = max(self.largest_request, tokens)
        last = request.messages[-1]
        said = last["content"] if isinstance(last.get("content"), str) else ""
        yield TextDelta(f"Thanks, {last.get('name') or 'friend'} — noted: {' '.join(said.split()[:12])}")
        yield Finish("stop")

    async def complete(self, request: ChatRequest) -> str:
        return await collect_text(self.stream(request))

    def accepts_tools(self, model: str) -> bool:
        return False

    async def discover_window(self, model: str) -> int | None:
        return None

    async def aclose(self) -> None:
        return None


def summarise(request: ChatRequest) -> str:
    """Previous summary (trimmed), the first sentence of each folded line, and its identifiers."""
    body = request.messages[-1]["content"]
    previous, _, conversation = body.partition("Conversation to fold in:\n")
    previous = previous.removeprefix("Summary so far:\n").strip()
    conversation = conversation.rsplit("\n\nWrite the updated", 1)[0]
    lines = [line for line in conversation.splitlines() if line.strip()]
    firsts = []
    for line in lines:
        match = _FIRST_SENTENCE.match(line)
        firsts.append(match.group(0) if match else line)
    budget = request.max_tokens // 2 if request.max_tokens else 300
    identifiers = extract_identifiers(lines)
    fresh = " ".join(firsts) + (f" Identifiers: {', '.join(identifiers)}" if identifiers else "")
    fresh_tokens = count_tokens(fresh)
    kept_previous = truncate_to_tokens(previous, max(budget - fresh_tokens, 0)) if previous else ""
    return truncate_to_tokens(f"{kept_previous}\n{fresh}".strip(), budget)


def turn_text(turn: dict[str, Any]) -> str:
    text = turn["text"]
    if turn.get("caption"):
        text += f" [shares a photo: {turn['caption']}]"
    return text


async def replay(
    path: Path,
    *,
    window: int,
    max_turns: int | None,
    shares: dict[str, str] | None = None,
    model_window: int | None = None,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            REPO_CONFIG,
            {
                "CHORUS_DATABASE_URL": f"sqlite:///{tmp}/chorus.db",
                "CHORUS_DATA_DIR": f"{tmp}/data",
                "CHORUS_MODEL_CONTEXT_WINDOW": str(window),
                "CHORUS_MEMORY_ENABLED": "false",
                **(shares or {}),
            },
        )
        # A model whose real window is smaller than the configured one rejects requests
        # the budget let through: the overflow-recovery path.
        model = WindowedModel(model_window or window)
        runtime = build_runtime(settings, provider=model)
        assert runtime.context is not None
        counters = runtime.context.counters
        errors = 0
        turns = 0
        management_ms: list[float] = []
        started = time.perf_counter()
        for index, turn in enumerate(locomo_turns(path)):
            if max_turns is not None and index >= max_turns:
                break
            text = turn_text(turn)
            if not text.strip():
                continue
            before = counters.seconds
            reply: Reply = await runtime.engine.respond(
                InboundMessage(
                    lane="web",
                    platform_message_id=f"{path.stem}-{index}",
                    chat_id=f"locomo-{path.stem}",
                    chat_kind="group",
                    actor=Actor(user_id=turn["speaker"], display_name=turn["speaker"], username=None),
                    text=text,
                    was_mentioned=True,
                )
            )
            await runtime.engine.drain()
            management_ms.append((counters.seconds - before) * 1000)
            turns += 1
            errors += reply.kind == "error"
        elapsed = time.perf_counter() - started
        await runtime.aclose()
    return {
        "conversation": path.stem,
        "turns": turns,
        "largest request (tokens)": model.largest_request,
        "window": window,
        "under window every turn": model.largest_request + settings.model.reply_reserve_tokens <= window,
        "compactions": counters.compactions,
        "collapses": counters.collapses,
        "overflow recoveries": counters.overflow_recoveries,
        "errors to users": errors,
        "summary fallbacks": len(counters.fallbacks),
        "ctx mgmt ms/turn mean": sum(management_ms) / max(len(management_ms), 1),
        "ctx mgmt ms p95": percentile(management_ms, 0.95),
        "wall s": elapsed,
    }


def total_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    turns = sum(row["turns"] for row in rows)
    return {
        "conversation": "all",
        "turns": turns,
        "largest request (tokens)": max(row["largest request (tokens)"] for row in rows),
        "window": rows[0]["window"],
        "under window every turn": all(row["under window every turn"] for row in rows),
        "compactions": sum(row["compactions"] for row in rows),
        "collapses": sum(row["collapses"] for row in rows),
        "overflow recoveries": sum(row["overflow recoveries"] for row in rows),
        "errors to users": sum(row["errors to users"] for row in rows),
        "summary fallbacks": sum(row["summary fallbacks"] for row in rows),
        "ctx mgmt ms/turn mean": sum(row["ctx mgmt ms/turn mean"] * row["turns"] for row in rows)
        / max(turns, 1),
        "ctx mgmt ms p95": max(row["ctx mgmt ms p95"] for row in rows),
        "wall s": sum(row["wall s"] for row in rows),
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=None, help="replay only the first N files")
    parser.add_argument("--turns", type=int, default=None, help="replay only the first N turns of each")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="model context window, tokens")
    parser.add_argument("--compact-share", help="override context.compact_share")
    parser.add_argument("--collapse-share", help="override context.collapse_share")
    parser.add_argument(
        "--model-window", type=int, help="the model's real window, when smaller than the configured one"
    )
    args = parser.parse_args(argv if argv is not None else [])
    logging.basicConfig(level=logging.ERROR)
    files = locomo_files()[: args.conversations]
    # Collapse runs when the context nears the limit; with the shipped shares,
    # compaction (70%) keeps it below the collapse threshold (85%), so exercising
    # collapse in a replay takes a lower collapse share than compaction share.
    shares = {
        name: value
        for name, value in (
            ("CHORUS_CONTEXT_COMPACT_SHARE", args.compact_share),
            ("CHORUS_CONTEXT_COLLAPSE_SHARE", args.collapse_share),
        )
        if value is not None
    }
    rows = [
        asyncio.run(
            replay(
                path, window=args.window, max_turns=args.turns, shares=shares, model_window=args.model_window
            )
        )
        for path in files
    ]
    rows.append(total_row(rows))
    print(markdown_table(rows))
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
