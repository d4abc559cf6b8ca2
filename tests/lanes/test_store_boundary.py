"""No SQL runs on the event loop's thread while a lane takes a turn, on SQLite and PostgreSQL.

From the moment a message reaches a lane until its reply is delivered and the
after-turn work is done, every statement runs on the database's threads
(tests/support/sql_threads.py records them).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.runtime import Runtime
from channels.discord.lane import DiscordLane
from channels.telegram.lane import TelegramLane
from channels.web.app import create_app
from tests.discord.conftest import lane_settings, spoken
from tests.discord.fake_discord import DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runtime import RuntimeFactory
from tests.support.sql_threads import assert_off_the_loop, sql_threads
from tests.telegram.bot_api_server import TOKEN, FakeBotAPI, private_text
from tests.web.conftest import parse_events

RuntimeOn = Callable[..., Runtime]


@pytest.fixture
def runtime_on(
    database: dict[str, str], tmp_path: Path, fake_openai: FakeOpenAI, runtimes: RuntimeFactory
) -> RuntimeOn:
    def build(**overrides: Any) -> Runtime:
        # Offload after every turn, so the after-turn work touches memory's tables too.
        return runtimes(
            tmp_path, model_base_url=fake_openai.base_url, memory_turns_threshold=1, **database, **overrides
        )

    return build


async def test_web_turn_and_commands_run_no_sql_on_the_loop(runtime_on: RuntimeOn) -> None:
    runtime = runtime_on()
    transport = httpx.ASGITransport(app=create_app(runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://chat.test") as client:
        with sql_threads(runtime.database) as seen:
            state = (await client.post("/api/session", json={"name": "Alice"})).json()
            headers = {"Authorization": f"Bearer {state['token']}"}
            for text in ("hello there", "/context", "/memory"):
                response = await client.post(
                    f"/api/sessions/{state['session_id']}/messages", headers=headers, data={"text": text}
                )
                assert response.status_code == 200, response.text
                assert parse_events(response.text)[-1].name == "done"
            history = await client.get(f"/api/sessions/{state['session_id']}/messages", headers=headers)
            await runtime.engine.drain()
    assert [m["text"] for m in history.json()["messages"] if m["role"] == "assistant"] == [
        "reply to: hello there"
    ]
    assert_off_the_loop(seen)


@pytest.fixture
async def bot_api() -> AsyncIterator[FakeBotAPI]:
    async with FakeBotAPI() as server:
        yield server


async def test_telegram_turn_runs_no_sql_on_the_loop(runtime_on: RuntimeOn, bot_api: FakeBotAPI) -> None:
    runtime = runtime_on(channels_telegram_token=TOKEN, channels_telegram_api_base=bot_api.base_url)
    lane = TelegramLane(runtime, edit_interval=0.2, album_delay=0.2)
    await lane.start()
    try:
        with sql_threads(runtime.database) as seen:
            bot_api.push(private_text(501, "hello there"))
            await bot_api.wait_for(lambda: bot_api.sent_texts(501) == ["Ada\nreply to: hello there"])
            bot_api.push(private_text(501, "/status"))
            await bot_api.wait_for(lambda: len(bot_api.sent_texts(501)) == 2)
            await runtime.engine.drain()
    finally:
        await lane.stop()
    assert_off_the_loop(seen)


@pytest.fixture
async def fake_discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_discord_turn_runs_no_sql_on_the_loop(runtime_on: RuntimeOn, fake_discord: FakeDiscord) -> None:
    runtime = runtime_on(**lane_settings(fake_discord))
    lane = DiscordLane(runtime, edit_interval=0.05, retry_first=0.05)
    await lane.start()
    try:
        await asyncio.wait_for(fake_discord.connected.wait(), 60)
        with sql_threads(runtime.database) as seen:
            await fake_discord.post_message(DM_CHANNEL_ID, "hello there")
            await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: hello there")])
            await runtime.engine.drain()
    finally:
        await lane.stop()
    assert_off_the_loop(seen)
