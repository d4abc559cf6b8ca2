"""Polling outlives what Telegram or aiogram throws at it: it backs off, retries, answers on."""

from __future__ import annotations

import logging

import httpx
import pytest

from bot.runtime import Runtime
from channels.telegram.lane import TelegramLane
from channels.web.app import create_host_app
from tests.support.teardown import within_deadline
from tests.telegram.bot_api_server import FakeBotAPI, private_text
from tests.telegram.conftest import LaneFactory


def errors_from(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and r.levelno >= logging.ERROR]


async def test_an_update_aiogram_cannot_read_is_left_out_and_the_next_is_answered(
    start_lane: LaneFactory, bot_api: FakeBotAPI, caplog: pytest.LogCaptureFixture
) -> None:
    await start_lane()
    # `chat` is required: aiogram refuses the whole getUpdates answer this update is in.
    unreadable = private_text(911, "never read", message_id=6001)
    unreadable["message"]["chat"] = None
    bot_api.push(unreadable, private_text(911, "after the bad one", message_id=6002))

    await bot_api.wait_for(lambda: bot_api.sent_texts(911))
    assert bot_api.sent_texts(911) == ["Ada\nreply to: after the bad one"]
    (logged,) = errors_from(caplog, "channels.telegram.polling")
    assert f"{unreadable['update_id']} cannot be read" in logged.getMessage() and logged.exc_info is not None

    bot_api.push(private_text(911, "and another", message_id=6003))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(911)) == 2)
    # The unreadable update was confirmed with the others: Telegram does not send it again.
    await bot_api.wait_for(lambda: bot_api.confirmed_offset > unreadable["update_id"])
    assert len(errors_from(caplog, "channels.telegram.polling")) == 1


async def test_a_failing_get_updates_is_retried_and_the_lane_answers_again(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI, caplog: pytest.LogCaptureFixture
) -> None:
    # An error aiogram raises that is neither a network nor a server error.
    bot_api.fail_next("getUpdates", {"ok": False, "error_code": 400, "description": "Bad Request: odd"})
    await start_lane()
    bot_api.push(private_text(912, "are you there?", message_id=6010))

    await bot_api.wait_for(lambda: bot_api.sent_texts(912))
    assert bot_api.sent_texts(912) == ["Ada\nreply to: are you there?"]
    (logged,) = errors_from(caplog, "channels.telegram.polling")
    assert "getUpdates failed (TelegramBadRequest" in logged.getMessage() and logged.exc_info is not None
    assert runtime.lanes.snapshot()["telegram"].state == "running"


async def test_the_lane_shows_down_while_it_waits_to_poll_again(
    runtime: Runtime, bot_api: FakeBotAPI
) -> None:
    bot_api.fail_next("getUpdates", {"ok": False, "error_code": 400, "description": "Bad Request: odd"})
    lane = TelegramLane(runtime, retry_first=30.0)
    await lane.start()
    try:
        await bot_api.wait_for(lambda: runtime.lanes.snapshot()["telegram"].state == "down")
        reason = runtime.lanes.snapshot()["telegram"].reason or ""
        assert "TelegramBadRequest" in reason and "retrying in 3" in reason
        transport = httpx.ASGITransport(app=create_host_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://chorus") as client:
            health = await client.get("/healthz")
        assert health.status_code == 200
        assert health.json()["lanes"]["telegram"]["state"] == "down"
    finally:
        await within_deadline(lane.stop(), "stopping the Telegram lane")
