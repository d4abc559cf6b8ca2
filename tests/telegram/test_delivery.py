"""How updates arrive: webhook with a secret, polling, and the same update delivered twice."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import SecretStr

from bot.errors import ConfigError
from bot.runtime import Runtime
from channels.telegram.lane import TelegramLane
from channels.web.app import create_app
from tests.fakes.openai_server import FakeOpenAI
from tests.telegram.bot_api_server import FakeBotAPI, private_text
from tests.telegram.conftest import LaneFactory

SECRET = "s3cret-token_1"
WEBHOOK_URL = "https://bot.example.org/hooks/telegram"


@pytest.fixture
async def webhook(runtime: Runtime, start_lane: LaneFactory) -> AsyncIterator[httpx.AsyncClient]:
    """The web app `chorus serve` runs, with the lane's webhook mounted in it."""
    lane = await start_lane(mode="webhook", webhook_url=WEBHOOK_URL, webhook_secret=SecretStr(SECRET))
    app = create_app(runtime)
    lane.mount(app)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://chorus.test") as client:
        yield client


async def test_webhook_is_registered_with_the_secret(webhook: httpx.AsyncClient, bot_api: FakeBotAPI) -> None:
    registered = bot_api.calls_to("setWebhook")[0].params
    assert registered["url"] == WEBHOOK_URL
    assert registered["secret_token"] == SECRET
    assert registered["allowed_updates"] == ["message"]
    assert not bot_api.calls_to("getUpdates")
    assert (await webhook.get("/healthz")).status_code == 200  # the same app serves the web lane


async def test_webhook_rejects_a_wrong_or_missing_secret(
    webhook: httpx.AsyncClient, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    update = private_text(801, "let me in")
    wrong = await webhook.post(
        "/hooks/telegram", json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "guess"}
    )
    missing = await webhook.post("/hooks/telegram", json=update)
    right = await webhook.post(
        "/hooks/telegram",
        json=private_text(801, "hello"),
        headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
    )

    assert (wrong.status_code, missing.status_code, right.status_code) == (401, 401, 200)
    await bot_api.wait_for(lambda: bot_api.sent_texts(801) == ["reply to: hello"])
    assert all("let me in" not in request.body.decode() for request in fake_openai.requests)


async def test_webhook_update_posted_twice_gets_one_reply(
    webhook: httpx.AsyncClient, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    update = private_text(802, "only once please")
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    for _ in range(2):
        response = await webhook.post("/hooks/telegram", json=update, headers=headers)
        assert response.json() == {"ok": True}
    await webhook.post("/hooks/telegram", json=private_text(802, "next"), headers=headers)

    await bot_api.wait_for(lambda: bot_api.sent_texts(802)[-1:] == ["reply to: next"])

    assert bot_api.sent_texts(802) == ["reply to: only once please", "reply to: next"]
    assert len(fake_openai.requests) == 2


async def test_polling_update_served_twice_gets_one_reply(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    update = private_text(803, "only once please")
    bot_api.push(update)
    await bot_api.wait_for(lambda: bot_api.sent_texts(803) == ["reply to: only once please"])

    bot_api.push(update, private_text(803, "next"))
    await bot_api.wait_for(lambda: bot_api.sent_texts(803)[-1:] == ["reply to: next"])

    assert bot_api.sent_texts(803) == ["reply to: only once please", "reply to: next"]
    assert len(fake_openai.requests) == 2


async def test_restarted_lane_does_not_answer_an_update_again(
    start_lane: LaneFactory, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    update = private_text(804, "only once please")
    first = await start_lane()
    bot_api.push(update)
    await bot_api.wait_for(lambda: bot_api.sent_texts(804) == ["reply to: only once please"])
    await first.stop()

    # A fresh process remembers nothing; the stored message id is what stops a second reply.
    await start_lane()
    bot_api.push(update, private_text(804, "next"))
    await bot_api.wait_for(lambda: bot_api.sent_texts(804)[-1:] == ["reply to: next"])

    assert bot_api.sent_texts(804) == ["reply to: only once please", "reply to: next"]
    assert len(fake_openai.requests) == 2


async def test_webhook_mode_without_a_secret_is_refused(runtime: Runtime) -> None:
    runtime.settings.channels.telegram.mode = "webhook"
    runtime.settings.channels.telegram.webhook_url = WEBHOOK_URL

    with pytest.raises(ConfigError, match="CHORUS_TELEGRAM_WEBHOOK_SECRET"):
        TelegramLane(runtime)
