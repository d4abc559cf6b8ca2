"""Tool rounds: the server's CPU per round, excluding the tool and the model.

    .venv/bin/python bench/tool_rounds.py [turns]

The model is an in-process stand-in that answers with one call per round and then a
short text (no HTTP, next to no CPU of its own); the tool returns at once. So what is
measured is Chorus's own work per round: storing the call, parsing and checking the
arguments, running the call, storing the result, building the context again and the
next request. (a) turns through the engine with 0, 1, 2 and 4 rounds: CPU per round is
the difference to a plain turn, divided by the rounds. (b) a plain turn and a two-round
turn through the web API (an httpx client on the ASGI app in the same process, so the
client's CPU is counted too: an upper bound). After-turn work (memory, compaction)
runs between turns, outside the measured time.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from bench.common import markdown_table, median, percentile  # noqa: E402
from bot.config import Settings, load_settings  # noqa: E402
from bot.providers.base import ChatRequest, Finish, ModelEvent, TextDelta, ToolCall  # noqa: E402
from bot.runtime import Runtime, build_runtime  # noqa: E402
from bot.tools.base import FunctionTool, ToolContext  # noqa: E402
from bot.tools.registry import StaticTools  # noqa: E402
from bot.turns.inbound import Actor, InboundMessage  # noqa: E402
from channels.web.app import create_app  # noqa: E402

ROUNDS = (0, 1, 2, 4)
TARGET_ROUND_MS = 3.0
TARGET_WEB_TURN_MS = 20.0
QUESTION = "Could you remind me what we decided about the release date for the mobile app?"


class Word(BaseModel):
    word: str


async def _echo(context: ToolContext, arguments: Word) -> object:
    return {"echo": arguments.word}


ECHO = FunctionTool("echo", "Say a word back.", Word, _echo, read_only=True)


class RoundsModel:
    """Calls `echo` once per round until `rounds` results follow the question, then answers."""

    name = "bench-rounds"

    def __init__(self) -> None:
        self.rounds = 0

    async def stream(self, request: ChatRequest) -> AsyncGenerator[ModelEvent, None]:
        messages = request.messages
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
        done = sum(1 for message in messages[last_user:] if message.get("role") == "tool")
        if request.tools and request.tool_choice != "none" and done < self.rounds:
            # A new word each round: three identical calls would end the turn's rounds early.
            yield ToolCall(f"call_{done}", "echo", f'{{"word": "release {done}"}}')
            yield Finish("tool_calls")
            return
        yield TextDelta("We agreed to ship on the 12th, after the QA pass.")
        yield Finish("stop")

    async def complete(self, request: ChatRequest) -> str:
        return "A short summary."

    def accepts_tools(self, model: str) -> bool:
        return True

    async def aclose(self) -> None:
        return None


def _settings(directory: Path) -> Settings:
    return load_settings(
        Path(__file__).resolve().parents[1] / "config.yaml",
        {
            "CHORUS_DATABASE_URL": f"sqlite:///{directory / 'bench.db'}",
            "CHORUS_DATA_DIR": str(directory / "data"),
            # One visitor sends every web turn here.
            "CHORUS_CHANNELS_WEB_RATE_LIMIT_PER_MINUTE": "1000000",
            "CHORUS_CHANNELS_WEB_MESSAGES_PER_IP_PER_MINUTE": "1000000",
            # As the default install (no dense extra) runs; the other benchmarks' figures too.
            "CHORUS_MEMORY_DENSE": "false",
        },
    )


def _inbound(index: int) -> InboundMessage:
    user = f"user{index % 10}"
    return InboundMessage(
        lane="web",
        platform_message_id=f"t{index}",
        chat_id=user,
        chat_kind="private",
        actor=Actor(user_id=user, display_name="Bench"),
        text=QUESTION,
    )


async def _cpu_per_turn(
    runtime: Runtime, turn: Callable[[int], Awaitable[None]], turns: int, start: int
) -> list[float]:
    samples = []
    for index in range(start, start + turns):
        started = time.process_time()
        await turn(index)
        samples.append((time.process_time() - started) * 1000)
        await runtime.engine.drain()
    return samples


async def _bench(turns: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    model = RoundsModel()
    with tempfile.TemporaryDirectory() as directory:
        runtime = build_runtime(_settings(Path(directory)), provider=model)
        runtime.tools.add_source(StaticTools([ECHO]))

        async def engine_turn(index: int) -> None:
            reply = await runtime.engine.respond(_inbound(index))
            assert reply.kind == "assistant", reply

        model.rounds = 0
        await _cpu_per_turn(runtime, engine_turn, 20, 0)  # warm-up
        engine: dict[int, list[float]] = {}
        next_index = 20
        for rounds in ROUNDS:
            model.rounds = rounds
            engine[rounds] = await _cpu_per_turn(runtime, engine_turn, turns, next_index)
            next_index += turns
        plain = median(engine[0])
        engine_rows = [
            {
                "rounds per turn": rounds,
                "CPU per turn p50 ms": median(samples),
                "p99 ms": percentile(samples, 0.99),
                "CPU per round ms": (median(samples) - plain) / rounds if rounds else "—",
                "target": f"≤ {TARGET_ROUND_MS:g} ms per round" if rounds else "",
            }
            for rounds, samples in engine.items()
        ]

        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(runtime)), base_url="http://bench.test"
        ) as client:
            session = (await client.post("/api/session", json={"name": "Bench"})).json()
            headers = {"Authorization": f"Bearer {session['token']}"}
            path = f"/api/sessions/{session['session_id']}/messages"

            async def web_turn(index: int) -> None:
                response = await client.post(path, headers=headers, data={"text": QUESTION})
                assert response.status_code == 200 and "event: done" in response.text, response.text

            web: dict[int, list[float]] = {}
            for rounds in (0, 2):
                model.rounds = rounds
                await _cpu_per_turn(runtime, web_turn, 10, 0)  # warm-up
                web[rounds] = await _cpu_per_turn(runtime, web_turn, turns, 0)
        await runtime.aclose()
    web_rows = [
        {
            "turn": "plain" if rounds == 0 else f"{rounds} tool rounds",
            "CPU per turn p50 ms": median(samples),
            "p99 ms": percentile(samples, 0.99),
            "target": f"≤ {TARGET_WEB_TURN_MS:g} ms" if rounds else "",
        }
        for rounds, samples in web.items()
    ]
    return engine_rows, web_rows


def main(turns: int = 200) -> list[dict[str, Any]]:
    engine_rows, web_rows = asyncio.run(_bench(turns))
    print("\n### (a) turns through the engine, by tool rounds per turn\n")
    print(markdown_table(engine_rows))
    print("\n### (b) turns through the web API (client included)\n")
    print(markdown_table(web_rows))
    return engine_rows + web_rows


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
