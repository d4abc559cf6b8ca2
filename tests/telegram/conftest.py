from __future__ import annotations

import io
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from bot.runtime import Runtime
from channels.telegram.lane import TelegramLane
from tests.fakes.openai_server import FakeOpenAI, fake_openai_fixture  # noqa: F401
from tests.support.runtime import make_runtime
from tests.support.teardown import within_deadline
from tests.telegram.bot_api_server import TOKEN, FakeBotAPI

# Fast enough for tests, slow enough that throttling and albums are observable.
EDIT_INTERVAL = 0.2
GROUP_EDIT_INTERVAL = 0.5
ALBUM_DELAY = 0.2

LaneFactory = Callable[..., Awaitable[TelegramLane]]


@pytest.fixture
async def bot_api() -> AsyncIterator[FakeBotAPI]:
    async with FakeBotAPI() as server:
        yield server


@pytest.fixture
async def runtime(tmp_path: Path, fake_openai: FakeOpenAI, bot_api: FakeBotAPI) -> AsyncIterator[Runtime]:
    built = make_runtime(
        tmp_path,
        model_base_url=fake_openai.base_url,
        channels_telegram_token=TOKEN,
        channels_telegram_api_base=bot_api.base_url,
    )
    yield built
    await within_deadline(built.aclose(), "closing the runtime")


@pytest.fixture
async def start_lane(runtime: Runtime) -> AsyncIterator[LaneFactory]:
    """Starts a Telegram lane on `runtime`; `settings` override channels.telegram."""
    lanes: list[TelegramLane] = []

    async def start(**settings: Any) -> TelegramLane:
        runtime.settings.channels.telegram = runtime.settings.channels.telegram.model_copy(update=settings)
        lane = TelegramLane(
            runtime,
            edit_interval=EDIT_INTERVAL,
            group_edit_interval=GROUP_EDIT_INTERVAL,
            album_delay=ALBUM_DELAY,
        )
        await lane.start()
        lanes.append(lane)
        return lane

    yield start
    for lane in lanes:
        await within_deadline(lane.stop(), "stopping the Telegram lane")


@pytest.fixture
async def lane(start_lane: LaneFactory) -> TelegramLane:
    return await start_lane()


def jpeg(width: int = 40, height: int = 30, color: str = "red") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, format="JPEG")
    return buffer.getvalue()
