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
from tests.telegram.bot_api_server import TOKEN, FakeBotAPI, private_text
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
    # Callback queries are the presses of a tool call's Run and Deny buttons.
    assert registered["allowed_updates"] == ["callback_query", "message", "stopped_message_generation"]
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
    await bot_api.wait_for(lambda: bot_api.sent_texts(801) == ["Ada\nreply to: hello"])
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

    await bot_api.wait_for(lambda: bot_api.sent_texts(802)[-1:] == ["Ada\nreply to: next"])

    assert bot_api.sent_texts(802) == ["Ada\nreply to: only once please", "Ada\nreply to: next"]
    assert len(fake_openai.requests) == 2


async def test_polling_confirms_each_update_with_the_next_offset(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    first, second = private_text(803, "one"), private_text(803, "two")
    bot_api.push(first)
    await bot_api.wait_for(lambda: bot_api.sent_texts(803) == ["Ada\nreply to: one"])
    bot_api.push(second)
    await bot_api.wait_for(lambda: bot_api.sent_texts(803)[-1:] == ["Ada\nreply to: two"])

    # Telegram forgets an update once a later getUpdates passes an offset above its id.
    await bot_api.wait_for(lambda: not bot_api.unconfirmed)
    offsets = [int(call.params.get("offset", 0)) for call in bot_api.calls_to("getUpdates")]
    assert first["update_id"] + 1 in offsets and second["update_id"] + 1 in offsets
    assert len(fake_openai.requests) == 2


async def test_update_redelivered_after_a_lost_confirmation_is_answered_once(
    start_lane: LaneFactory, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    update = private_text(804, "only once please")
    # The poller's calls that would confirm the update never reach Telegram, and the
    # process stops: Telegram still holds the update as unconfirmed.
    bot_api.losing_confirmations = True
    first = await start_lane()
    bot_api.push(update)
    await bot_api.wait_for(lambda: bot_api.sent_texts(804) == ["Ada\nreply to: only once please"])
    await first.stop()
    assert bot_api.unconfirmed == [update["update_id"]]
    bot_api.losing_confirmations = False

    # A fresh process remembers nothing; the stored message id is what stops a second reply.
    await start_lane()
    await bot_api.wait_for(lambda: not bot_api.unconfirmed)
    bot_api.push(private_text(804, "next"))
    await bot_api.wait_for(lambda: bot_api.sent_texts(804)[-1:] == ["Ada\nreply to: next"])

    assert bot_api.sent_texts(804) == ["Ada\nreply to: only once please", "Ada\nreply to: next"]
    assert len(fake_openai.requests) == 2
    served = [call for call in bot_api.calls_to("getUpdates") if call.params.get("offset") is None]
    assert len(served) >= 2  # each process started without an offset and was served the update


async def test_get_updates_is_refused_while_a_webhook_is_set(bot_api: FakeBotAPI) -> None:
    async with httpx.AsyncClient(base_url=bot_api.base_url) as client:
        await client.post(f"/bot{TOKEN}/setWebhook", data={"url": WEBHOOK_URL})
        refused = await client.post(f"/bot{TOKEN}/getUpdates", data={"timeout": "0"})
        await client.post(f"/bot{TOKEN}/deleteWebhook")
        served = await client.post(f"/bot{TOKEN}/getUpdates", data={"timeout": "0"})

    assert refused.status_code == 409 and "webhook is active" in refused.json()["description"]
    assert served.json() == {"ok": True, "result": []}


async def test_webhook_mode_without_a_secret_is_refused(runtime: Runtime) -> None:
    runtime.settings.channels.telegram.mode = "webhook"
    runtime.settings.channels.telegram.webhook_url = WEBHOOK_URL

    with pytest.raises(ConfigError, match="CHORUS_TELEGRAM_WEBHOOK_SECRET"):
        TelegramLane(runtime)
