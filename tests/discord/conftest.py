from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import discord
import pytest
import pytest_asyncio
import yarl
from discord.gateway import DiscordWebSocket

from bot.runtime import Runtime
from channels.discord.lane import DiscordLane
from tests.discord.fake_discord import VALID_TOKEN, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runtime import make_runtime

LaneFactory = Callable[..., Awaitable[tuple[DiscordLane, Runtime]]]


@pytest_asyncio.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        monkeypatch.setattr(discord.http.Route, "BASE", server.api_base)
        monkeypatch.setattr(DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(server.gateway_url))
        yield server


@pytest_asyncio.fixture
async def start_lane(
    tmp_path: Path, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> AsyncIterator[LaneFactory]:
    """Starts a Discord lane on a fresh runtime (settings as environment overrides)."""
    started: list[tuple[DiscordLane, Runtime]] = []

    async def start(**overrides: Any) -> tuple[DiscordLane, Runtime]:
        runtime = make_runtime(
            tmp_path / f"runtime{len(started)}",
            model_base_url=fake_openai.base_url,
            **{"discord_token": VALID_TOKEN, **overrides},
        )
        lane = DiscordLane(runtime, edit_interval=0.05)
        started.append((lane, runtime))
        fake_discord.connected.clear()
        await lane.start()
        await fake_discord.connected.wait()
        return lane, runtime

    yield start
    for lane, runtime in started:
        await lane.stop()
        await runtime.aclose()
