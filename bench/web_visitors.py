"""Web lane under load: concurrent visitors each send a message and read the streamed reply.

Starts `chorus serve` (demo provider, a temporary SQLite database) as a subprocess on a
free 127.0.0.1 port, then N visitors, each with its own httpx client, start a session and
all send one message at once. Reports replies/s, p50/p99 time to first token and to the
full reply, errors and the server's peak RSS.

    .venv/bin/python bench/web_visitors.py [--visitors 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, markdown_table, median, percentile  # noqa: E402

DEFAULT_VISITORS = 500
RUN_TIMEOUT_SECONDS = 180.0
REQUEST_TIMEOUT_SECONDS = 120.0
STARTUP_TIMEOUT_SECONDS = 30.0


@dataclass
class Outcome:
    first_token: float | None = None
    full_reply: float | None = None
    error: str | None = None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(workdir: Path, port: int, log: IO[bytes]) -> subprocess.Popen[bytes]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith("CHORUS_")}
    environ.update(
        {
            "CHORUS_DATABASE_URL": f"sqlite:///{workdir / 'chorus.db'}",
            "CHORUS_DATA_DIR": str(workdir / "data"),
            # INFO: the server logs its event-loop stalls (p99, max) when it stops.
            "CHORUS_LOG_LEVEL": "INFO",
            "CHORUS_CHANNELS_WEB_HOST": "127.0.0.1",
            "CHORUS_CHANNELS_WEB_PORT": str(port),
            "PYTHONPATH": str(REPO),
        }
    )
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; from bot.cli import main; sys.exit(main(['serve']))"],
        cwd=REPO,
        env=environ,
        stdout=subprocess.DEVNULL,
        # A file, not a pipe: a full pipe would stall the server mid-benchmark.
        stderr=log,
    )


async def wait_until_healthy(base_url: str, server: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    async with httpx.AsyncClient(base_url=base_url) as client:
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise RuntimeError(f"chorus serve exited: {log_path.read_text()}")
            try:
                if (await client.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("chorus serve did not become healthy in time")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class StartLine:
    """Holds every visitor until all have a session, then lets them send together."""

    expected: int
    arrived: int = 0

    def __post_init__(self) -> None:
        self.all_arrived = asyncio.Event()
        self.go = asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived == self.expected:
            self.all_arrived.set()
        await self.go.wait()


async def visit(base_url: str, number: int, start_line: StartLine) -> Outcome:
    outcome = Outcome()
    # No keep-alive: uvicorn closes idle connections after 5 s, which a visitor waiting at
    # the start line would race with; the message opens its own connection, as after a pause.
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_SECONDS, limits=limits) as client:
        try:
            try:
                started = await client.post("/api/session", json={"name": f"Visitor {number}"})
                started.raise_for_status()
            finally:
                await start_line.wait()
            state = started.json()
            headers = {"Authorization": f"Bearer {state['token']}"}
            began = time.perf_counter()
            async with client.stream(
                "POST",
                f"/api/sessions/{state['session_id']}/messages",
                headers=headers,
                files={"text": (None, f"Hello from visitor {number}, what can you do?")},
            ) as response:
                if response.status_code != 200:
                    outcome.error = f"HTTP {response.status_code}"
                    return outcome
                event = ""
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: "):
                        if event == "delta" and outcome.first_token is None:
                            outcome.first_token = time.perf_counter() - began
                        elif event == "done":
                            outcome.full_reply = time.perf_counter() - began
                            if not json.loads(line[6:]).get("message_id"):
                                outcome.error = "done without a stored message"
                        elif event == "error":
                            outcome.error = json.loads(line[6:]).get("text", "error event")
            if outcome.full_reply is None and outcome.error is None:
                outcome.error = "stream ended without a done event"
        except (httpx.HTTPError, ValueError, KeyError) as error:
            outcome.error = f"{type(error).__name__}: {error}"
    return outcome


async def run(visitors: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="chorus-web-bench-") as workdir:
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        log_path = Path(workdir) / "server.log"
        log = log_path.open("wb")
        server = start_server(Path(workdir), port, log)
        try:
            await wait_until_healthy(base_url, server, log_path)
            start_line = StartLine(visitors)
            tasks = [asyncio.create_task(visit(base_url, number, start_line)) for number in range(visitors)]
            await asyncio.wait_for(start_line.all_arrived.wait(), RUN_TIMEOUT_SECONDS)
            began = time.perf_counter()
            start_line.go.set()
            outcomes = await asyncio.wait_for(asyncio.gather(*tasks), RUN_TIMEOUT_SECONDS)
            wall = time.perf_counter() - began
            rss = peak_rss_mib(server.pid)
        finally:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()
            stalls = loop_stalls(log_path.read_text(errors="replace"))
    first = [outcome.first_token for outcome in outcomes if outcome.first_token is not None]
    full = [
        outcome.full_reply for outcome in outcomes if outcome.full_reply is not None and not outcome.error
    ]
    errors = [outcome.error for outcome in outcomes if outcome.error]
    if errors:
        print(f"first errors: {errors[:3]}", file=sys.stderr)
    return {
        "visitors": visitors,
        "replies": len(full),
        "errors": len(errors),
        "wall s": wall,
        "replies/s": len(full) / wall if wall else float("nan"),
        "TTFT p50 ms": median(first) * 1000,
        "TTFT p99 ms": percentile(first, 0.99) * 1000,
        "full p50 ms": median(full) * 1000,
        "full p99 ms": percentile(full, 0.99) * 1000,
        "server peak RSS MiB": rss,
        "loop stall p99 ms": stalls[0],
        "loop stall max ms": stalls[1],
    }


def loop_stalls(server_log: str) -> tuple[float, float]:
    """p99 and longest event-loop stall of the server's run, from the line it logs at exit."""
    found = re.search(r"event loop stalls: p99 ([\d.]+) ms, max ([\d.]+) ms", server_log)
    return (float(found.group(1)), float(found.group(2))) if found else (float("nan"), float("nan"))


def main(visitors: int = DEFAULT_VISITORS) -> list[dict[str, Any]]:
    rows = [asyncio.run(run(visitors))]
    print(f"\n### Web lane: {visitors} concurrent visitors, demo provider, SQLite\n")
    print(markdown_table(rows))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visitors", type=int, default=DEFAULT_VISITORS)
    main(parser.parse_args().visitors)
