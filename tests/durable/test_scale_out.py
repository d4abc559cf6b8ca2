"""Several `chorus serve` processes on one PostgreSQL: one Telegram poller, webhooks everywhere."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from bot.providers.openai import PURPOSE_HEADER
from tests.durable.serve_process import ServeProcess
from tests.fakes.openai_server import FakeOpenAI
from tests.support.peers import needs_postgres
from tests.telegram.bot_api_server import TOKEN, FakeBotAPI, private_text

SECRET = "scale-out_secret"
WEBHOOK_URL = "https://bot.example.org/telegram/webhook"
# The persona a process without a config file speaks as.
PERSONA = "Assistant"


def environment(
    database_url: str, fake_openai: FakeOpenAI, bot_api: FakeBotAPI, **extra: str
) -> dict[str, str]:
    return {
        "CHORUS_DATABASE_URL": database_url,
        "CHORUS_MODEL_BASE_URL": fake_openai.base_url,
        "CHORUS_TELEGRAM_TOKEN": TOKEN,
        "CHORUS_CHANNELS_TELEGRAM_API_BASE": bot_api.base_url,
        **extra,
    }


@needs_postgres
async def test_a_second_telegram_poller_on_one_database_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAI, postgres_url: str
) -> None:
    async with FakeBotAPI() as bot_api:
        settings = environment(postgres_url, fake_openai, bot_api)
        first = ServeProcess(tmp_path, settings, name="first")
        second = ServeProcess(tmp_path, settings, name="second")
        after_crash = ServeProcess(tmp_path, settings, name="after-crash")
        try:
            await first.start()
            with pytest.raises(AssertionError, match="exited at start"):
                await second.start()
            assert await second.wait() == 2
            assert "Another process already polls Telegram" in second.log()
            assert "mode: webhook" in second.log()
            # Refused before it changed anything on Telegram.
            assert len(bot_api.calls_to("deleteWebhook")) == 1

            # The role is held by the first process's connection: a kill -9 frees it.
            first.kill()
            await after_crash.start()
            bot_api.push(private_text(77, "still polled?"))
            await bot_api.wait_for(lambda: bot_api.sent_texts(77), 120)
            assert bot_api.sent_texts(77) == [f"{PERSONA}\nreply to: still polled?"]
        finally:
            for serve in (first, second, after_crash):
                serve.kill()


@needs_postgres
async def test_webhook_mode_takes_telegram_updates_in_every_process(
    tmp_path: Path, fake_openai: FakeOpenAI, postgres_url: str
) -> None:
    async with FakeBotAPI() as bot_api:
        settings = environment(
            postgres_url,
            fake_openai,
            bot_api,
            CHORUS_CHANNELS_TELEGRAM_MODE="webhook",
            CHORUS_CHANNELS_TELEGRAM_WEBHOOK_URL=WEBHOOK_URL,
            CHORUS_TELEGRAM_WEBHOOK_SECRET=SECRET,
        )
        processes = [ServeProcess(tmp_path, settings, name=f"serve{n}") for n in range(2)]
        try:
            await asyncio.gather(*(serve.start() for serve in processes))
            headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
            first, second = private_text(81, "to the first"), private_text(82, "to the second")
            async with httpx.AsyncClient(timeout=60) as client:
                # A load balancer spreads updates; Telegram's retry of one may land on the other process.
                for serve, update in ((processes[0], first), (processes[1], second), (processes[1], first)):
                    response = await client.post(
                        f"{serve.url}/telegram/webhook", json=update, headers=headers
                    )
                    assert response.json() == {"ok": True}
            await bot_api.wait_for(
                lambda: (
                    bot_api.sent_texts(81) == [f"{PERSONA}\nreply to: to the first"]
                    and bot_api.sent_texts(82) == [f"{PERSONA}\nreply to: to the second"]
                ),
                120,
            )
        finally:
            for serve in processes:
                serve.signal(15)
            codes = [await serve.wait() for serve in processes]
        assert codes == [0, 0]
        assert [call.params["url"] for call in bot_api.calls_to("setWebhook")] == [WEBHOOK_URL] * 2
        assert not bot_api.calls_to("getUpdates") and not bot_api.calls_to("deleteWebhook")
        # The copy that reached the second process is not answered again.
        assert bot_api.sent_texts(81) == [f"{PERSONA}\nreply to: to the first"]
        # Memory work at shutdown asks the model too; turns are the requests without a purpose.
        turns = [r for r in fake_openai.requests if PURPOSE_HEADER.lower() not in r.headers]
        assert len(turns) == 2
