"""`chorus serve` as an operator runs it: the Telegram lane starts beside the web lane."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.telegram.bot_api_server import TOKEN, FakeBotAPI, private_text

REPO = Path(__file__).resolve().parents[2]
# Generous: a cold `chorus serve` on a busy 2-core machine takes well over ten seconds.
READY_SECONDS = 120.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_chorus_serve_runs_the_telegram_lane_with_a_token(tmp_path: Path, bot_api: FakeBotAPI) -> None:
    port = free_port()
    environ = {key: value for key, value in os.environ.items() if not key.startswith("CHORUS_")}
    environ.update(
        CHORUS_TELEGRAM_TOKEN=TOKEN,
        CHORUS_CHANNELS_TELEGRAM_API_BASE=bot_api.base_url,
        CHORUS_DATABASE_URL=f"sqlite:///{tmp_path / 'chorus.db'}",
        CHORUS_DATA_DIR=str(tmp_path / "data"),
        CHORUS_CHANNELS_WEB_PORT=str(port),
    )
    server = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve"],
        cwd=REPO,
        env=environ,
    )
    try:
        # Importing aiogram alone takes seconds of CPU on a loaded machine: wait on readiness.
        deadline = time.monotonic() + READY_SECONDS
        async with httpx.AsyncClient() as client:
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        bot_api.push(private_text(7, "hello through chorus serve"))
        expected = "You said: “hello through chorus serve”"
        while time.monotonic() < deadline and server.poll() is None:
            # The first text sent is the streaming draft; the final text replaces it.
            if any(expected in text for text in bot_api.sent_texts()):
                break
            await asyncio.sleep(0.1)
        assert {"getMe", "setMyCommands", "getUpdates"} <= {call.method for call in bot_api.calls}
        assert expected in bot_api.sent_texts()[0]
    finally:
        server.terminate()
        # Waited for off the event loop: the Bot API stand-in answers the lane's last calls.
        await asyncio.to_thread(server.wait, 60)
