"""Several `chorus serve` processes on one PostgreSQL: throughput per process count, and a crash.

    .venv/bin/python bench/scale.py          # needs CHORUS_BENCH_POSTGRES_URL or CHORUS_TEST_POSTGRES_URL

1, 2 and 3 processes (the offline demo model, web lane) share one fresh database; the same
bounded load — VISITORS web visitors chatting at once, each sending MESSAGES messages one after
another, visitors spread round-robin over the processes — measures replies/s and the p99 of a
reply. Then, with 2 processes, one is killed with SIGKILL a third of the way through the load
and started again; its visitors carry on against the other process, re-sending the message that
broke with the same client id. Afterwards every message sent is checked in the database: stored,
answered exactly once (live or by recovery), and each reply stored right after its question.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import drop_database, fresh_database  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
VISITORS = 24
MESSAGES = 6
READY_SECONDS = 300.0


@dataclass
class Process:
    """One `chorus serve` on a free port, logging to a file."""

    database_url: str
    workdir: Path
    port: int = 0
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if not self.port:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                self.port = int(probe.getsockname()[1])
        environ = {key: value for key, value in os.environ.items() if not key.startswith("CHORUS_")}
        environ.update(
            CHORUS_CONFIG=str(self.workdir / "none.yaml"),
            CHORUS_DATABASE_URL=self.database_url,
            CHORUS_DATA_DIR=str(self.workdir / "data"),
            CHORUS_CHANNELS_WEB_PORT=str(self.port),
            CHORUS_LOG_LEVEL="WARNING",
            # All bench visitors share 127.0.0.1; per-address abuse limits would throttle the load itself.
            CHORUS_CHANNELS_WEB_STREAMS_PER_IP="100000",
            CHORUS_CHANNELS_WEB_VISITORS_PER_IP_PER_MINUTE="100000",
            CHORUS_CHANNELS_WEB_MESSAGES_PER_IP_PER_MINUTE="100000",
            CHORUS_CHANNELS_WEB_RATE_LIMIT_PER_MINUTE="100000",
        )
        log = (self.workdir / f"serve-{self.port}.log").open("ab")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve"], cwd=REPO, env=environ, stdout=log, stderr=log
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        async with httpx.AsyncClient() as client:
            while time.monotonic() < deadline:
                try:
                    if (await client.get(f"{self.url}/healthz")).status_code == 200:
                        return
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
        raise RuntimeError(f"chorus serve on port {self.port} did not start")

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            self.popen.wait(timeout=60)


@dataclass
class Load:
    """What the visitors did: reply latencies, and every message id they sent."""

    latencies: list[float] = field(default_factory=list)
    sent: set[str] = field(default_factory=set)
    retries: int = 0


async def visitor(
    client: httpx.AsyncClient, processes: list[Process], home: int, load: Load, progress: asyncio.Event
) -> None:
    state = (await client.post(f"{processes[home].url}/api/session", json={})).json()
    headers = {"Authorization": f"Bearer {state['token']}"}
    for number in range(MESSAGES):
        client_id = f"{state['visitor_id']}-{number}"
        load.sent.add(client_id)
        started = time.perf_counter()
        target = home
        while True:
            try:
                response = await client.post(
                    f"{processes[target].url}/api/sessions/{state['session_id']}/messages",
                    headers=headers,
                    data={"text": f"message {number} of {state['visitor_id']}", "client_id": client_id},
                )
                if response.status_code == 200 and "event: done" in response.text:
                    break
            except httpx.TransportError:
                pass
            # The process went away mid-reply: the same message again, to another process.
            load.retries += 1
            target = (target + 1) % len(processes)
            await asyncio.sleep(0.05)
        load.latencies.append(time.perf_counter() - started)
        if len(load.latencies) >= VISITORS * MESSAGES // 3:
            progress.set()


async def run_load(processes: list[Process], crash: Process | None = None) -> tuple[Load, float]:
    load = Load()
    progress = asyncio.Event()
    async with httpx.AsyncClient(timeout=120) as client:
        started = time.perf_counter()
        visitors = [
            asyncio.create_task(visitor(client, processes, n % len(processes), load, progress))
            for n in range(VISITORS)
        ]
        if crash is not None:
            await progress.wait()
            crash.kill()
            crash.start()
            await crash.ready()
        await asyncio.gather(*visitors)
        elapsed = time.perf_counter() - started
    return load, elapsed


def check(database_url: str, load: Load) -> dict[str, int]:
    """Messages lost, answered once or more, replies out of place, turns recovered."""
    database = create_engine(make_url(database_url).set(drivername="postgresql+psycopg"))
    with database.connect() as connection:
        stored = {
            row.platform_message_id: row.id
            for row in connection.execute(
                text("SELECT id, platform_message_id FROM messages WHERE role = 'user' AND lane = 'web'")
            )
        }
        answers: dict[int, int] = {}
        for row in connection.execute(
            text(
                "SELECT reply_to_id, count(*) AS n FROM messages "
                "WHERE role = 'assistant' GROUP BY reply_to_id"
            )
        ):
            answers[row.reply_to_id] = row.n
        rows = connection.execute(
            text(
                "SELECT session_id, id, role, reply_to_id FROM messages "
                "WHERE role IN ('user', 'assistant') ORDER BY session_id, seq"
            )
        ).all()
        recovered = connection.execute(
            text("SELECT count(*) FROM deliveries WHERE state = 'recovered'")
        ).scalar_one()
    database.dispose()
    out_of_place = sum(
        1
        for before, row in zip(rows, rows[1:], strict=False)
        if row.role == "assistant" and (before.session_id != row.session_id or before.id != row.reply_to_id)
    )
    ids = [stored[client_id] for client_id in load.sent if client_id in stored]
    return {
        "sent": len(load.sent),
        "lost": len(load.sent) - len(ids),
        "answered once": sum(1 for message_id in ids if answers.get(message_id) == 1),
        "answered twice or more": sum(1 for message_id in ids if answers.get(message_id, 0) > 1),
        "unanswered": sum(1 for message_id in ids if message_id not in answers),
        "out of place": out_of_place,
        "recovered after the crash": recovered,
    }


async def measure(admin_url: str, workdir: Path) -> None:
    print(f"{VISITORS} visitors x {MESSAGES} messages, demo model, web lane\n")
    print("| processes | replies | seconds | replies/s | p50 reply (ms) | p99 reply (ms) |")
    print("|---|---|---|---|---|---|")
    for count in (1, 2, 3):
        url = fresh_database(admin_url)
        processes = [Process(url, workdir) for _ in range(count)]
        try:
            for process in processes:
                process.start()
            await asyncio.gather(*(process.ready() for process in processes))
            load, elapsed = await run_load(processes)
        finally:
            for process in processes:
                process.stop()
            drop_database(admin_url, url)
        latencies = sorted(load.latencies)
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        print(
            f"| {count} | {len(latencies)} | {elapsed:.1f} | {len(latencies) / elapsed:.1f} | "
            f"{statistics.median(latencies) * 1000:.0f} | {p99 * 1000:.0f} |",
            flush=True,
        )

    url = fresh_database(admin_url)
    processes = [Process(url, workdir) for _ in range(2)]
    try:
        for process in processes:
            process.start()
        await asyncio.gather(*(process.ready() for process in processes))
        load, _ = await run_load(processes, crash=processes[1])
        # Recovery runs at the restarted process's start; give it time to finish.
        await asyncio.sleep(5)
        result = check(url, load)
    finally:
        for process in processes:
            process.stop()
        drop_database(admin_url, url)
    print(
        "\n2 processes, one killed with SIGKILL a third of the way through and restarted "
        f"({load.retries} re-sends):\n"
    )
    print("| " + " | ".join(result) + " |")
    print("|" + "---|" * len(result))
    print("| " + " | ".join(str(value) for value in result.values()) + " |")


def main() -> None:
    admin_url = os.environ.get("CHORUS_BENCH_POSTGRES_URL") or os.environ.get("CHORUS_TEST_POSTGRES_URL")
    if not admin_url:
        print("skipped: set CHORUS_BENCH_POSTGRES_URL (a PostgreSQL role that may create databases)")
        return
    with tempfile.TemporaryDirectory() as workdir:
        asyncio.run(measure(admin_url, Path(workdir)))


if __name__ == "__main__":
    main()
