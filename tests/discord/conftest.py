from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.runtime import Runtime
from channels.discord.lane import DiscordLane
from tests.discord.fake_discord import VALID_TOKEN, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runtime import make_runtime
from tests.support.teardown import within_deadline

LaneFactory = Callable[..., Awaitable[tuple[DiscordLane, Runtime]]]


async def eventually(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    """Wait for state the stand-in does not see change (the lane's own), checking often."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


def spoken(text: str, persona: str = "Ada") -> str:
    """An assistant reply as a DM shows it: the persona's name in bold, then the text."""
    return f"**{persona}**\n{text}"


@pytest.fixture(autouse=True)
def no_unhandled_errors_in_event_handlers(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """discord.py only logs what an event handler raises; such a test must not pass."""
    yield
    records = caplog.get_records("call")
    errors = [r.getMessage() for r in records if r.name == "discord.client" and r.levelno >= logging.ERROR]
    assert not errors, errors


@pytest_asyncio.fixture
async def fake_discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def lane_settings(server: FakeDiscord, token: str = VALID_TOKEN) -> dict[str, str]:
    """The Discord lane's settings for the stand-in, as environment overrides."""
    return {
        "discord_token": token,
        "channels_discord_api_base": server.api_base,
        "channels_discord_gateway_url": server.gateway_url,
    }


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
            **{**lane_settings(fake_discord), **overrides},
        )
        lane = DiscordLane(runtime, edit_interval=0.05, retry_first=0.05)
        started.append((lane, runtime))
        fake_discord.connected.clear()
        await lane.start()
        await fake_discord.connected.wait()
        return lane, runtime

    yield start
    for lane, runtime in started:
        await within_deadline(lane.stop(), "stopping the Discord lane")
        await within_deadline(runtime.aclose(), "closing the runtime")
