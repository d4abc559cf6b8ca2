"""Web lane under load: visitors send messages and read the streamed replies.

Starts `chorus serve` (demo provider, a temporary SQLite database) as a subprocess on a
free 127.0.0.1 port. Two modes:

- open loop (the capacity measure): messages arrive at a fixed rate, whether or not
  earlier replies have finished, for a few seconds per rate; reports first-token p50/p99,
  the server's CPU milliseconds per turn (from /proc), its event-loop lag and the highest
  rate whose first-token p99 stays under 500 ms;
- burst (a robustness check): N visitors start a session and all send one message at
  once; reports replies/s, latencies, errors, the server's peak RSS and event-loop lag.

Event-loop lag (how late the server's loop ran a 10 ms timer) is read from the server's
`chorus_event_loop_lag_seconds` histogram on /metrics, before and after each measured
window, so it covers that window only: p99 and max are the histogram bucket bounds they
fall under (docs/benchmarks.md says "≤"). The burst also reports the exact p99 and max of
the server's whole life, start-up and shutdown included, from the line it logs at exit.

    .venv/bin/python bench/web_visitors.py [--visitors 500] [--rates 5,10,20,40] [--seconds 6]
        [--database-url postgresql://user:pass@127.0.0.1/empty_db] [--openai]

`--visitors 0` runs the open loop only.

`--database-url` runs the server on that (empty, migrated on start) database instead of a
temporary SQLite file. `--openai` has the server answer from a local OpenAI-compatible server
(the test suite's, in this process, so its CPU is not counted as the server's) that streams a
60-token answer a word per chunk, instead of from the demo model.
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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, markdown_table, median, percentile  # noqa: E402

DEFAULT_VISITORS = 500
DEFAULT_RATES = (5, 10, 20, 40, 80)
DEFAULT_SECONDS = 6.0
FIRST_TOKEN_TARGET_SECONDS = 0.5
# Every simulated visitor connects from 127.0.0.1: lift the per-address limits for the benchmark.
UNLIMITED_ADDRESS = {
    "CHORUS_CHANNELS_WEB_VISITORS_PER_IP_PER_MINUTE": "1000000",
    "CHORUS_CHANNELS_WEB_MESSAGES_PER_IP_PER_MINUTE": "1000000",
    "CHORUS_CHANNELS_WEB_STREAMS_PER_IP": "1000000",
}
METRICS_TOKEN = "bench-metrics-token"
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


DENSE_SETTING = "CHORUS_MEMORY_DENSE"
# A typical chat answer (about 60 tokens), streamed by the local OpenAI-compatible server one
# word per chunk, the way a real model streams a token per chunk.
OPENAI_ANSWER = (
    "Happy to help. I can answer questions, explain ideas step by step, draft and edit text, "
    "summarise documents and images you send, and remember what matters to you between "
    "conversations. Tell me what you are working on and what a good result would look like, "
    "and we can start from there."
)


@dataclass
class Target:
    """What the benchmarked server runs on: its database, and its model."""

    database_url: str | None = None
    openai: bool = False
    _model_url: str | None = field(default=None, init=False)

    def __str__(self) -> str:
        postgres = (self.database_url or "").startswith("postgres")
        database = "PostgreSQL" if postgres else "SQLite"
        model = "a local OpenAI-compatible server" if self.openai else "demo provider"
        return f"{model}, {database}"

    @asynccontextmanager
    async def model(self) -> AsyncIterator[None]:
        """The local OpenAI-compatible server for the run, when one is asked for."""
        if not self.openai:
            yield
            return
        # In this process: its CPU is the benchmark's, not the server's.
        from tests.fakes.openai_server import FakeOpenAI

        async with FakeOpenAI() as model:
            model.default = lambda body: OPENAI_ANSWER
            self._model_url = model.base_url
            try:
                yield
            finally:
                self._model_url = None

    def model_environment(self) -> dict[str, str]:
        if self._model_url is None:
            return {}
        return {"CHORUS_MODEL_BASE_URL": self._model_url, "CHORUS_MODEL_API_KEY": "bench-key"}


def start_server(workdir: Path, port: int, log: IO[bytes], target: Target) -> subprocess.Popen[bytes]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith("CHORUS_")}
    # Dense recall stays the caller's choice (CHORUS_MEMORY_DENSE=false): embedding each
    # turn's query is a large share of a turn's CPU when it is on.
    if DENSE_SETTING in os.environ:
        environ[DENSE_SETTING] = os.environ[DENSE_SETTING]
    environ.update(
        {
            "CHORUS_DATABASE_URL": target.database_url or f"sqlite:///{workdir / 'chorus.db'}",
            **target.model_environment(),
            "CHORUS_DATA_DIR": str(workdir / "data"),
            # INFO: the server logs its event-loop stalls (p99, max) when it stops.
            "CHORUS_LOG_LEVEL": "INFO",
            "CHORUS_CHANNELS_WEB_HOST": "127.0.0.1",
            "CHORUS_CHANNELS_WEB_PORT": str(port),
            # /metrics (the event-loop lag histogram), readable without the token.
            "CHORUS_CHANNELS_WEB_ADMIN_TOKEN": METRICS_TOKEN,
            "CHORUS_CHANNELS_WEB_METRICS_PUBLIC": "true",
            "PYTHONPATH": str(REPO),
            **UNLIMITED_ADDRESS,
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


LAG_BUCKET = re.compile(r'^chorus_event_loop_lag_seconds_bucket\{le="([^"]+)"\} ([\d.e+]+)$', re.M)


async def loop_lag_buckets(base_url: str) -> list[tuple[float, float]]:
    """(upper bound in seconds, cumulative count) of the server's event-loop lag histogram."""
    async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_SECONDS) as client:
        text = (await client.get("/metrics")).text
    return [(float(bound), float(count)) for bound, count in LAG_BUCKET.findall(text)]


def lag_window(before: list[tuple[float, float]], after: list[tuple[float, float]]) -> tuple[float, float]:
    """Upper bounds (ms) of the p99 and of the longest lag between two scrapes of the histogram."""
    counts = [(bound, now - then) for (bound, now), (_, then) in zip(after, before, strict=True)]
    total = counts[-1][1] if counts else 0
    if not total:
        return float("nan"), float("nan")
    p99 = next(bound for bound, count in counts if count >= 0.99 * total)
    longest = next(bound for bound, count in counts if count >= total)
    return p99 * 1000, longest * 1000


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


async def read_reply(response: httpx.Response, began: float, outcome: Outcome) -> None:
    if response.status_code != 200:
        outcome.error = f"HTTP {response.status_code}"
        return
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


async def new_visitors(base_url: str, count: int) -> list[tuple[str, str]]:
    """(token, session id) of `count` new visitors, made before the clock starts."""
    async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_SECONDS) as client:
        made = []
        for number in range(count):
            client.cookies.clear()
            state = (await client.post("/api/session", json={"name": f"Visitor {number}"})).json()
            made.append((state["token"], state["session_id"]))
        return made


async def open_loop_step(base_url: str, pid: int, rate: float, seconds: float) -> dict[str, Any]:
    """Messages from fresh visitors at `rate` a second for `seconds`; latency and server CPU."""
    visitors = await new_visitors(base_url, round(rate * seconds))
    limits = httpx.Limits(max_connections=len(visitors), max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base_url, timeout=REQUEST_TIMEOUT_SECONDS, limits=limits) as client:

        async def one(token: str, session_id: str, number: int) -> Outcome:
            outcome = Outcome()
            began = time.perf_counter()
            try:
                async with client.stream(
                    "POST",
                    f"/api/sessions/{session_id}/messages",
                    headers={"Authorization": f"Bearer {token}"},
                    files={"text": (None, f"Hello from visitor {number}, what can you do?")},
                ) as response:
                    await read_reply(response, began, outcome)
            except (httpx.HTTPError, ValueError, KeyError) as error:
                outcome.error = f"{type(error).__name__}: {error}"
            return outcome

        lag_before = await loop_lag_buckets(base_url)
        cpu_before = cpu_seconds(pid)
        started = time.perf_counter()
        tasks = []
        for number, (token, session_id) in enumerate(visitors):
            # Arrivals on a fixed schedule: a slow server does not slow the arrivals down.
            delay = started + number / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(token, session_id, number)))
        outcomes = await asyncio.wait_for(asyncio.gather(*tasks), RUN_TIMEOUT_SECONDS)
        cpu = cpu_seconds(pid) - cpu_before
        lag_p99, lag_max = lag_window(lag_before, await loop_lag_buckets(base_url))
    first = [outcome.first_token for outcome in outcomes if outcome.first_token is not None]
    done = [outcome for outcome in outcomes if outcome.full_reply is not None and not outcome.error]
    return {
        "rate /s": rate,
        "turns": len(done),
        "errors": len(outcomes) - len(done),
        "TTFT p50 ms": median(first) * 1000,
        "TTFT p99 ms": percentile(first, 0.99) * 1000,
        "server CPU ms/turn": cpu / max(len(done), 1) * 1000,
        "loop lag p99 ms ≤": lag_p99,
        "loop lag max ms ≤": lag_max,
    }


@dataclass
class Server:
    """A `chorus serve` the benchmark started; `log_text` is its log once it has stopped."""

    base_url: str
    process: subprocess.Popen[bytes]
    log_text: str = ""


@asynccontextmanager
async def running_server(target: Target, stop_seconds: float) -> AsyncIterator[Server]:
    """A healthy server on a free port in a temporary folder, stopped (and its log read) at exit."""
    with tempfile.TemporaryDirectory(prefix="chorus-web-bench-") as workdir:
        port = free_port()
        log_path = Path(workdir) / "server.log"
        log = log_path.open("wb")
        server = Server(f"http://127.0.0.1:{port}", start_server(Path(workdir), port, log, target))
        try:
            await wait_until_healthy(server.base_url, server.process, log_path)
            yield server
        finally:
            server.process.terminate()
            try:
                server.process.wait(timeout=stop_seconds)
            except subprocess.TimeoutExpired:
                server.process.kill()
            log.close()
            server.log_text = log_path.read_text(errors="replace")


async def run_open_loop(rates: list[float], seconds: float, target: Target) -> list[dict[str, Any]]:
    rows = []
    async with target.model(), running_server(target, stop_seconds=15) as server:
        # One turn first, so the measured steps see a warm server.
        await open_loop_step(server.base_url, server.process.pid, 1, 1)
        for rate in rates:
            rows.append(await open_loop_step(server.base_url, server.process.pid, rate, seconds))
    return rows


def highest_rate(rows: list[dict[str, Any]]) -> float | None:
    """The highest arrival rate whose first-token p99 stayed under the target, with no errors."""
    good = [
        row["rate /s"]
        for row in rows
        if row["errors"] == 0 and row["TTFT p99 ms"] < FIRST_TOKEN_TARGET_SECONDS * 1000
    ]
    return max(good) if good else None


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
                await read_reply(response, began, outcome)
        except (httpx.HTTPError, ValueError, KeyError) as error:
            outcome.error = f"{type(error).__name__}: {error}"
    return outcome


async def run(visitors: int, target: Target) -> dict[str, Any]:
    async with target.model(), running_server(target, stop_seconds=60) as server:
        base_url, pid = server.base_url, server.process.pid
        start_line = StartLine(visitors)
        tasks = [asyncio.create_task(visit(base_url, number, start_line)) for number in range(visitors)]
        await asyncio.wait_for(start_line.all_arrived.wait(), RUN_TIMEOUT_SECONDS)
        lag_before = await loop_lag_buckets(base_url)
        cpu_before = cpu_seconds(pid)
        began = time.perf_counter()
        start_line.go.set()
        outcomes = await asyncio.wait_for(asyncio.gather(*tasks), RUN_TIMEOUT_SECONDS)
        wall = time.perf_counter() - began
        cpu = cpu_seconds(pid) - cpu_before
        lag_p99, lag_max = lag_window(lag_before, await loop_lag_buckets(base_url))
        rss = peak_rss_mib(pid)
    stalls = loop_stalls(server.log_text)
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
        "server CPU ms/turn": cpu / max(len(full), 1) * 1000,
        "server peak RSS MiB": rss,
        "loop lag p99 ms ≤": lag_p99,
        "loop lag max ms ≤": lag_max,
        "whole run: loop stall p99 ms": stalls[0],
        "whole run: loop stall max ms": stalls[1],
    }


def loop_stalls(server_log: str) -> tuple[float, float]:
    """p99 and longest event-loop stall of the server's run, from the line it logs at exit."""
    found = re.search(r"event loop stalls: p99 ([\d.]+) ms, max ([\d.]+) ms", server_log)
    return (float(found.group(1)), float(found.group(2))) if found else (float("nan"), float("nan"))


def main(
    visitors: int = DEFAULT_VISITORS,
    rates: tuple[float, ...] = DEFAULT_RATES,
    seconds: float = DEFAULT_SECONDS,
    database_url: str | None = None,
    openai: bool = False,
) -> list[dict[str, Any]]:
    target = Target(database_url, openai)
    open_rows = asyncio.run(run_open_loop(list(rates), seconds, target))
    print(f"\n### Web lane, open loop: fixed arrival rates, {seconds:g} s each, {target}\n")
    print(markdown_table(open_rows))
    best = highest_rate(open_rows)
    print(f"\nHighest rate with first-token p99 < 500 ms and no errors: {best if best else 'none'} /s")
    if not visitors:
        return open_rows
    rows = [asyncio.run(run(visitors, target))]
    print(f"\n### Web lane: burst of {visitors} concurrent visitors, {target}\n")
    print(markdown_table(rows))
    return open_rows + rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visitors", type=int, default=DEFAULT_VISITORS)
    parser.add_argument("--rates", default=",".join(str(rate) for rate in DEFAULT_RATES))
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS)
    parser.add_argument("--database-url", default=None, help="an empty database (default: temporary SQLite)")
    parser.add_argument(
        "--openai",
        action="store_true",
        help="answer from a local OpenAI-compatible server streaming a token per chunk (default: demo model)",
    )
    arguments = parser.parse_args()
    main(
        arguments.visitors,
        tuple(float(rate) for rate in arguments.rates.split(",")),
        arguments.seconds,
        arguments.database_url,
        arguments.openai,
    )
