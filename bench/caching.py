"""Prompt caching: prompt tokens billed per turn of a 50-turn conversation with tools.

    .venv/bin/python bench/caching.py [turns] [--openai]

Each turn goes through the engine to the Anthropic provider, against the Messages API
stand-in (tests/fakes/anthropic_server.py) on 127.0.0.1: the model calls a tool once, then
answers, so a turn is two model calls. The stand-in bills as the API does: the prefix up to
a `cache_control` breakpoint is written once it is 1,024 tokens or longer (the floor of
most Claude models), and a later request reads the longest written prefix that ends at
one of its breakpoints or up to 20 blocks before one. The same conversation runs twice,
with Chorus's breakpoints and without any. "Billed as input" weighs each token as Anthropic
prices it: a cache read 0.1, a cache write 1.25, an uncached token 1. Long-term memory is
off, so the system prompt is the persona's, the same each turn (with memory on, what
recall finds changes every turn and is sent after the cached part).

The same conversation also runs through the OpenAI-compatible provider against the
Chat Completions stand-in (tests/fakes/openai_server.py), which caches automatically: each
answer's `prompt_tokens_details.cached_tokens` is the longest prefix of the request (tools,
then messages) that an earlier request already sent. Its table is the share of each turn's
prompt tokens the server reports as cached (`--openai`: that table alone).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import BaseModel  # noqa: E402

from bench.common import markdown_table  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.providers.anthropic import AnthropicProvider  # noqa: E402
from bot.providers.openai import OpenAICompatibleProvider  # noqa: E402
from bot.runtime import build_runtime  # noqa: E402
from bot.tools.base import FunctionTool, ToolContext  # noqa: E402
from bot.tools.registry import StaticTools  # noqa: E402
from bot.turns.inbound import Actor, InboundMessage  # noqa: E402
from tests.fakes.anthropic_server import Answer, FakeAnthropic  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCalls  # noqa: E402

TURNS = 50
MIN_CACHEABLE_TOKENS = 1024
READ_PRICE, WRITE_PRICE = 0.1, 1.25
QUESTIONS = (
    "What did we decide about the release date for the mobile app?",
    "Who is reviewing the payment changes this week?",
    "Can you check the weather for the team offsite in Bergen?",
    "Remind me what the customer said about the export feature.",
)


class Topic(BaseModel):
    topic: str


async def _notes(context: ToolContext, arguments: Topic) -> object:
    return {"topic": arguments.topic, "notes": f"Notes on {arguments.topic}: " + "agreed, see ticket. " * 12}


NOTES = FunctionTool("notes", "Look up the team's notes on a topic.", Topic, _notes, read_only=True)


def _answer(body: dict[str, Any]) -> Answer:
    """A tool call for a new question, then an answer once its result is in; summaries in text."""
    if _after_turn(body):
        return Answer(text="Earlier the team looked up notes on several questions; all were agreed.")
    last = body["messages"][-1]["content"]
    if any(block.get("type") == "tool_result" for block in last):
        return Answer(text="From the notes: it was agreed, and the ticket has the details. " * 3)
    return Answer(tool_calls=[("notes", {"topic": "the question"})])


def _after_turn(body: dict[str, Any]) -> bool:
    """A summary or distillation: it offers the turn's tools but may call none (or has none)."""
    choice = body.get("tool_choice")
    return (
        not body.get("tools")
        or choice == "none"
        or (isinstance(choice, dict) and choice.get("type") == "none")
    )


def _openai_answer(body: dict[str, Any]) -> Reply | ToolCalls:
    """The same two calls a turn as `_answer`, in the Chat Completions shape."""
    if _after_turn(body):
        return Reply("Earlier the team looked up notes on several questions; all were agreed.")
    if body["messages"][-1].get("role") == "tool":
        return Reply("From the notes: it was agreed, and the ticket has the details. " * 3)
    return ToolCalls(calls=[("notes", {"topic": "the question"})])


def _settings(directory: str, model: str) -> Any:
    return load_settings(
        Path(__file__).resolve().parents[1] / "config.yaml",
        {
            "CHORUS_DATABASE_URL": f"sqlite:///{Path(directory) / 'bench.db'}",
            "CHORUS_DATA_DIR": str(Path(directory) / "data"),
            "CHORUS_MEMORY_ENABLED": "false",
            "CHORUS_MODEL_NAME": model,
        },
    )


async def _openai_conversation(turns: int) -> list[dict[str, int]]:
    """Per turn: prompt and cached tokens the server reported, summed over the turn's calls."""
    with tempfile.TemporaryDirectory() as directory:
        async with FakeOpenAI() as server:
            server.default = _openai_answer
            runtime = build_runtime(
                _settings(directory, "openai-bench"), provider=OpenAICompatibleProvider(server.base_url)
            )
            runtime.tools.add_source(StaticTools([NOTES]))
            reported: list[dict[str, int]] = []
            for turn in range(turns):
                before = len(server.usages)
                reply = await runtime.engine.respond(_inbound(turn))
                assert reply.kind == "assistant", reply
                await runtime.engine.drain()
                # The turn's own calls; compaction's summaries are not counted.
                usage = [answered for body, answered in server.usages[before:] if not _after_turn(body)]
                reported.append(
                    {
                        "prompt": sum(call["prompt_tokens"] for call in usage),
                        "cached": sum(call["prompt_tokens_details"]["cached_tokens"] for call in usage),
                    }
                )
            await runtime.aclose()
    return reported


async def _conversation(cache: bool, turns: int) -> list[dict[str, int]]:
    """Per turn: input, cache-read and cache-write tokens, summed over the turn's calls."""
    with tempfile.TemporaryDirectory() as directory:
        settings = _settings(directory, "claude-bench")
        async with FakeAnthropic(min_cacheable_tokens=MIN_CACHEABLE_TOKENS) as server:
            server.default = _answer
            provider = AnthropicProvider("bench-key", base_url=server.base_url, cache=cache)
            runtime = build_runtime(settings, provider=provider)
            runtime.tools.add_source(StaticTools([NOTES]))
            billed: list[dict[str, int]] = []
            for turn in range(turns):
                before = len(server.requests)
                reply = await runtime.engine.respond(_inbound(turn))
                assert reply.kind == "assistant", reply
                await runtime.engine.drain()
                # The turn's own calls; compaction's summaries are not counted.
                usage = [r.usage for r in server.requests[before:] if r.usage and not _after_turn(r.json)]
                billed.append(
                    {
                        key: sum(call[key] for call in usage)
                        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
                    }
                )
            await runtime.aclose()
    return billed


def _inbound(turn: int) -> InboundMessage:
    return InboundMessage(
        lane="web",
        platform_message_id=f"t{turn}",
        chat_id="bench",
        chat_kind="private",
        actor=Actor(user_id="bench", display_name="Bench"),
        text=f"{QUESTIONS[turn % len(QUESTIONS)]} ({turn + 1})",
    )


def _weighed(turn: dict[str, int]) -> float:
    return (
        turn["input_tokens"]
        + READ_PRICE * turn["cache_read_input_tokens"]
        + WRITE_PRICE * turn["cache_creation_input_tokens"]
    )


def _prompt(turn: dict[str, int]) -> int:
    return sum(turn.values())


async def _bench(turns: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    cached = await _conversation(True, turns)
    plain = await _conversation(False, turns)
    rows = [
        {
            "turn": index + 1,
            "prompt tokens": _prompt(with_cache),
            "cache read": with_cache["cache_read_input_tokens"],
            "cache write": with_cache["cache_creation_input_tokens"],
            "uncached": with_cache["input_tokens"],
            "billed as input, cached": round(_weighed(with_cache)),
            "billed as input, no caching": round(_weighed(without)),
        }
        for index, (with_cache, without) in enumerate(zip(cached, plain, strict=True))
    ]
    cached_total = sum(_weighed(turn) for turn in cached)
    plain_total = sum(_weighed(turn) for turn in plain)
    totals = [
        {
            "run": "with breakpoints",
            "prompt tokens": sum(_prompt(turn) for turn in cached),
            "cache read": sum(turn["cache_read_input_tokens"] for turn in cached),
            "cache write": sum(turn["cache_creation_input_tokens"] for turn in cached),
            "uncached": sum(turn["input_tokens"] for turn in cached),
            "billed as input": round(cached_total),
            "share of no caching": f"{cached_total / plain_total:.0%}",
        },
        {
            "run": "no caching",
            "prompt tokens": sum(_prompt(turn) for turn in plain),
            "cache read": 0,
            "cache write": 0,
            "uncached": sum(turn["input_tokens"] for turn in plain),
            "billed as input": round(plain_total),
            "share of no caching": "100%",
        },
    ]
    return rows, totals


def _openai_rows(reported: list[dict[str, int]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
        {
            "turns": "all",
            "prompt tokens": sum(turn["prompt"] for turn in reported),
            "cached": sum(turn["cached"] for turn in reported),
        }
    ]
    for label, part in (("1-10", reported[:10]), ("11-", reported[10:])):
        if part:
            rows.append(
                {
                    "turns": label,
                    "prompt tokens": sum(turn["prompt"] for turn in part),
                    "cached": sum(turn["cached"] for turn in part),
                }
            )
    for row in rows:
        row["cached share"] = f"{row['cached'] / max(row['prompt tokens'], 1):.0%}"
    return rows


def main(argv: list[str] | None = None) -> None:
    """Both providers' tables; `--openai` only the OpenAI-compatible one."""
    argv = argv or []
    turns = int(next((arg for arg in argv if arg.isdigit()), TURNS))
    if "--openai" not in argv:
        rows, totals = asyncio.run(_bench(turns))
        print(
            f"Prompt tokens per turn ({turns} turns, a tool round each; tokens as the stand-in counts them)\n"
        )
        print(markdown_table(rows))
        print("\nTotals\n")
        print(markdown_table(totals))
        print()
    openai_rows = _openai_rows(asyncio.run(_openai_conversation(turns)))
    print(f"OpenAI-compatible server with automatic prefix caching ({turns} turns, a tool round each)\n")
    print(markdown_table(openai_rows))


if __name__ == "__main__":
    main(sys.argv[1:])
