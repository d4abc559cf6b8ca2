"""Tool rounds: the server's CPU per round, excluding the tool and the model.

    .venv/bin/python bench/tool_rounds.py [turns]

The model is an in-process stand-in that answers with one call per round and then a
short text (no HTTP, next to no CPU of its own); the tool returns at once. So what is
measured is Chorus's own work per round: storing the call, parsing and checking the
arguments, running the call, storing the result, building the context again and the
next request. (a) turns through the engine with 0, 1, 2 and 4 rounds, taking turns: CPU
per round is the difference to a plain turn, divided by the rounds. (b) plain and two-round turns
through the web API, taking turns: the server runs in a child process (uvicorn, the web
app, the same stand-in model and tool), an httpx client here posts over 127.0.0.1, and
the server's CPU per turn is read from /proc (every thread of the child, in
nanoseconds), so the client's CPU is not counted. After-turn work (memory, compaction)
runs between turns, outside the measured time: the engine drains it, and the web run
waits until the server's CPU stays still.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from bench.common import markdown_table, median, percentile  # noqa: E402
from bench.web_visitors import free_port, wait_until_healthy  # noqa: E402
from bot.config import Settings, load_settings  # noqa: E402
from bot.providers.base import ChatRequest, Finish, ModelEvent, TextDelta, ToolCall  # noqa: E402
from bot.runtime import Runtime, build_runtime  # noqa: E402
from bot.tools.base import FunctionTool, ToolContext  # noqa: E402
from bot.tools.registry import StaticTools  # noqa: E402
from bot.turns.inbound import Actor, InboundMessage  # noqa: E402
from channels.web.app import create_app  # noqa: E402

ROUNDS = (0, 1, 2, 4)
WEB_ROUNDS = (0, 2)
TARGET_ROUND_MS = 3.0
TARGET_WEB_TURN_MS = 20.0
QUESTION = "Could you remind me what we decided about the release date for the mobile app?"
# How a web turn tells the served stand-in model its rounds (a child process has no attribute to set).
ROUNDS_MARK = re.compile(r"\[rounds (\d+)\]$")
# How long the server may stay busy after a turn before the benchmark gives up.
BUSY_SECONDS = 60.0
# The server counts as idle (its after-turn work done) once its CPU moves less than this...
IDLE_CPU_NS = 300_000
# ...over this long.
IDLE_WINDOW_SECONDS = 0.05


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
        marked = ROUNDS_MARK.search(str(messages[last_user].get("content", "")))
        rounds = int(marked.group(1)) if marked else self.rounds
        if request.tools and request.tool_choice != "none" and done < rounds:
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

    async def discover_window(self, model: str) -> int | None:
        return None

    async def aclose(self) -> None:
        return None


def _settings(directory: Path, poll_seconds: float = 1.0) -> Settings:
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
            "CHORUS_JOBS_POLL_SECONDS": str(poll_seconds),
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


async def _cpu_by_rounds(
    runtime: Runtime,
    model: RoundsModel,
    turn: Callable[[int], Awaitable[None]],
    rounds: Sequence[int],
    turns: int,
    start: int,
) -> dict[int, list[float]]:
    """CPU ms of each turn, by its rounds; the round counts take turns, so a drift of this
    machine's speed during the run weighs on every count alike."""
    samples: dict[int, list[float]] = {count: [] for count in rounds}
    for index in range(start, start + turns * len(rounds)):
        model.rounds = rounds[index % len(rounds)]
        started = time.process_time()
        await turn(index)
        samples[model.rounds].append((time.process_time() - started) * 1000)
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

        await _cpu_by_rounds(runtime, model, engine_turn, ROUNDS, 5, 0)  # warm-up
        engine = await _cpu_by_rounds(runtime, model, engine_turn, ROUNDS, turns, 5 * len(ROUNDS))
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

        await runtime.aclose()
    web = await _web_turns(turns)
    web_rows = [
        {
            "turn": "plain" if rounds == 0 else f"{rounds} tool rounds",
            "server CPU per turn p50 ms": median(samples),
            "p99 ms": percentile(samples, 0.99),
            "target": f"≤ {TARGET_WEB_TURN_MS:g} ms" if rounds else "",
        }
        for rounds, samples in web.items()
    ]
    return engine_rows, web_rows


def _serve(port: int, directory: Path) -> None:
    """The child process of (b): the web app on 127.0.0.1:`port`, answered by `RoundsModel`.

    After-turn work waits for `POST /bench/after-turn`, as the engine's turns are followed
    by a drain: started by the reply, it would run while the turn's response is still
    being sent, inside the measured window.
    """

    async def run() -> None:
        runtime = build_runtime(_settings(directory, poll_seconds=3600), provider=RoundsModel())
        runtime.tools.add_source(StaticTools([ECHO]))
        jobs = runtime.engine.jobs
        wake = jobs.wake
        jobs.wake = lambda: None  # type: ignore[method-assign]
        app = create_app(runtime)

        @app.post("/bench/after-turn")
        async def after_turn() -> None:
            wake()
            await jobs.drain()

        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        await uvicorn.Server(config).serve()
        await runtime.aclose()

    asyncio.run(run())


def _cpu_ns(pid: int) -> int:
    """CPU time every thread of the process has used so far, in nanoseconds."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended while the tasks were listed
    return total


async def _until_idle(pid: int) -> None:
    """Wait until the server's after-turn work is done: its CPU stays (almost) still."""
    deadline = time.monotonic() + BUSY_SECONDS
    before = _cpu_ns(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(IDLE_WINDOW_SECONDS)
        now = _cpu_ns(pid)
        if now - before < IDLE_CPU_NS:
            return
        before = now
    raise RuntimeError("the server stayed busy between turns")


async def _web_turns(turns: int) -> dict[int, list[float]]:
    """Server CPU ms of each web turn, by its rounds (see the module's docstring)."""
    samples: dict[int, list[float]] = {rounds: [] for rounds in WEB_ROUNDS}
    with tempfile.TemporaryDirectory() as directory:
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        log_path = Path(directory) / "server.log"
        with log_path.open("wb") as log:
            # A file, not a pipe: a full pipe would stall the server mid-benchmark.
            server = subprocess.Popen(
                [sys.executable, __file__, "--serve", str(port), directory],
                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        try:
            await wait_until_healthy(base_url, server, log_path)
            async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
                session = (await client.post("/api/session", json={"name": "Bench"})).json()
                headers = {"Authorization": f"Bearer {session['token']}"}
                path = f"/api/sessions/{session['session_id']}/messages"
                warm_up = 5 * len(WEB_ROUNDS)
                for index in range(warm_up + turns * len(WEB_ROUNDS)):
                    rounds = WEB_ROUNDS[index % len(WEB_ROUNDS)]
                    await _until_idle(server.pid)
                    before = _cpu_ns(server.pid)
                    response = await client.post(
                        path, headers=headers, data={"text": f"{QUESTION} [rounds {rounds}]"}
                    )
                    used = _cpu_ns(server.pid) - before
                    assert response.status_code == 200 and "event: done" in response.text, response.text
                    (await client.post("/bench/after-turn")).raise_for_status()
                    if index >= warm_up:
                        samples[rounds].append(used / 1e6)
        finally:
            server.terminate()
            server.wait(timeout=30)
    return samples


def main(turns: int = 200) -> list[dict[str, Any]]:
    engine_rows, web_rows = asyncio.run(_bench(turns))
    print("\n### (a) turns through the engine, by tool rounds per turn\n")
    print(markdown_table(engine_rows))
    print("\n### (b) turns through the web API (the server's CPU; it runs in a child process)\n")
    print(markdown_table(web_rows))
    return engine_rows + web_rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        _serve(int(sys.argv[2]), Path(sys.argv[3]))
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
