"""Polling is one process only: Telegram ends a waiting getUpdates when another poller calls."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from channels.telegram.lane import TelegramLane
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runtime import RuntimeFactory
from tests.telegram.bot_api_server import TOKEN, FakeBotAPI, private_text
from tests.telegram.conftest import EDIT_INTERVAL


async def test_a_second_get_updates_terminates_the_waiting_one(bot_api: FakeBotAPI) -> None:
    async with httpx.AsyncClient(base_url=bot_api.base_url, timeout=60) as client:
        waiting = asyncio.create_task(client.post(f"/bot{TOKEN}/getUpdates", data={"timeout": "30"}))
        await bot_api.wait_for(lambda: len(bot_api.calls_to("getUpdates")) == 1)
        later = await client.post(f"/bot{TOKEN}/getUpdates", data={"timeout": "0"})
        ended = await waiting

    assert later.json() == {"ok": True, "result": []}
    assert ended.status_code == 409
    assert ended.json()["description"].startswith("Conflict: terminated by other getUpdates request")


async def test_a_poller_ended_by_another_marks_its_lane_failed(
    tmp_path: Path, runtimes: RuntimeFactory, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    # Two processes with their own databases, polling for one bot: nothing shared can refuse
    # the second, so the Bot API's own conflict answer is what tells the first.
    settings = {
        "model_base_url": fake_openai.base_url,
        "channels_telegram_token": TOKEN,
        "channels_telegram_api_base": bot_api.base_url,
    }
    first_runtime = runtimes(tmp_path / "first", **settings)
    second_runtime = runtimes(tmp_path / "second", **settings)
    first = TelegramLane(first_runtime, edit_interval=EDIT_INTERVAL)
    second = TelegramLane(second_runtime, edit_interval=EDIT_INTERVAL)
    await first.start()
    try:
        await bot_api.wait_for(lambda: bot_api.calls_to("getUpdates"))
        assert first_runtime.lanes.snapshot()["telegram"].state == "running"
        await second.start()
        try:
            await bot_api.wait_for(lambda: first_runtime.lanes.snapshot()["telegram"].state == "failed")
            reason = first_runtime.lanes.snapshot()["telegram"].reason or ""
            assert "terminated by other getUpdates request" in reason
            assert "mode: webhook" in reason

            # The process that polls now answers, once.
            calls_before = len(bot_api.calls_to("getUpdates"))
            bot_api.push(private_text(901, "who answers?"))
            await bot_api.wait_for(lambda: bot_api.sent_texts(901) == ["Ada\nreply to: who answers?"])
            assert second_runtime.lanes.snapshot()["telegram"].state == "running"
            assert len(fake_openai.requests) == 1
            assert len(bot_api.calls_to("getUpdates")) > calls_before
        finally:
            await second.stop()
    finally:
        await first.stop()
