"""A real `chorus serve` process for tests: started, waited on, signalled, read back."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.process import LoggedProcess

REPO = Path(__file__).resolve().parents[2]
READY_SECONDS = 180.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServeProcess(LoggedProcess):
    """`python -m bot.cli serve` with `environment` on top of a clean CHORUS_* slate."""

    def __init__(self, workdir: Path, environment: dict[str, str], name: str = "serve") -> None:
        self.port = free_port()
        super().__init__(workdir / f"{name}-{self.port}.log")
        environ = {key: value for key, value in os.environ.items() if not key.startswith("CHORUS_")}
        environ.update(
            CHORUS_DATA_DIR=str(workdir / "data"),
            CHORUS_CHANNELS_WEB_PORT=str(self.port),
            CHORUS_CONFIG=str(workdir / "none.yaml"),
            # Every test visitor comes from 127.0.0.1: the per-address abuse limits would see one crowd.
            CHORUS_CHANNELS_WEB_STREAMS_PER_IP="1000",
            CHORUS_CHANNELS_WEB_VISITORS_PER_IP_PER_MINUTE="10000",
            CHORUS_CHANNELS_WEB_MESSAGES_PER_IP_PER_MINUTE="100000",
            CHORUS_CHANNELS_WEB_RATE_LIMIT_PER_MINUTE="100000",
        )
        environ.update(environment)
        self._environ = environ

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve"], cwd=REPO, env=self._environ, stdout=log, stderr=log
        )
        deadline = time.monotonic() + READY_SECONDS
        async with httpx.AsyncClient() as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise AssertionError(f"chorus serve exited at start:\n{self.log()}")
                try:
                    if (await client.get(f"{self.url}/healthz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        raise AssertionError(f"chorus serve did not become ready:\n{self.log()}")

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    async def wait(self, timeout: float = READY_SECONDS) -> int:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while (code := self.process.poll()) is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"chorus serve did not exit:\n{self.log()}")
            await asyncio.sleep(0.05)
        return code

    def log_lines(self, needle: str) -> list[str]:
        return [line for line in self.log().splitlines() if needle in line]


async def wait_until(condition: Any, timeout: float = READY_SECONDS, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
    return result
