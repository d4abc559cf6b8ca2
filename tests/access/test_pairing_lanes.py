"""Pairing on the real lanes: aiogram on the Bot API stand-in and discord.py on the Discord stand-in.
A stranger's DM gets one message with a code and nothing else; once an admin approves it
(`/pair CODE` in the admin's own chat on Telegram; `chorus pair approve` on Discord), the
stranger's next message is answered."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from channels.discord.lane import DiscordLane
from channels.telegram.lane import TelegramLane
from tests.access.test_pairing import code_in
from tests.discord.fake_discord import ALICE, DM_CHANNEL_ID, VALID_TOKEN, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.support.teardown import within_deadline
from tests.telegram.bot_api_server import TOKEN, FakeBotAPI, private_text

ADMIN = 777
STRANGER = 501
DEADLINE = 60.0


async def test_a_telegram_stranger_is_answered_only_after_an_admin_pairs_them(
    fake_openai: FakeOpenAI, runtimes: Any, tmp_path: Path
) -> None:
    async with FakeBotAPI() as bot_api:
        runtime = runtimes(
            tmp_path,
            model_base_url=fake_openai.base_url,
            channels_telegram_token=TOKEN,
            channels_telegram_api_base=bot_api.base_url,
            channels_telegram_access_admins=[str(ADMIN)],
        )
        lane = TelegramLane(runtime)
        await lane.start()
        try:
            bot_api.push(private_text(STRANGER, "hello?", first_name="Mallory"))
            await bot_api.wait_for(lambda: len(bot_api.sent_texts(STRANGER)) == 1, timeout=DEADLINE)
            [told] = bot_api.sent_texts(STRANGER)
            code = code_in(told)
            bot_api.push(private_text(STRANGER, "are you there?", first_name="Mallory"))
            # The admin's listing comes after the stranger's second message was handled (one
            # poller, in order): by then it would have been answered, and it was not.
            bot_api.push(private_text(ADMIN, "/pair", first_name="Olga"))
            await bot_api.wait_for(
                lambda: any(code in text for text in bot_api.sent_texts(ADMIN)), timeout=DEADLINE
            )
            assert bot_api.sent_texts(STRANGER) == [told]
            assert fake_openai.requests == []

            bot_api.push(private_text(ADMIN, f"/pair {code}", first_name="Olga"))
            await bot_api.wait_for(
                lambda: any("Approved Mallory" in text for text in bot_api.sent_texts(ADMIN)),
                timeout=DEADLINE,
            )
            bot_api.push(private_text(STRANGER, "hello again", first_name="Mallory"))
            await bot_api.wait_for(
                lambda: bot_api.sent_texts(STRANGER)[-1:] == ["Ada\nreply to: hello again"], timeout=DEADLINE
            )
        finally:
            await within_deadline(lane.stop(), "stopping the Telegram lane")


async def test_a_discord_stranger_is_answered_only_after_an_admin_pairs_them(
    fake_openai: FakeOpenAI, runtimes: Any, tmp_path: Path
) -> None:
    async with FakeDiscord() as discord:
        runtime = runtimes(
            tmp_path,
            model_base_url=fake_openai.base_url,
            discord_token=VALID_TOKEN,
            channels_discord_api_base=discord.api_base,
            channels_discord_gateway_url=discord.gateway_url,
            channels_discord_access_admins=["1100000000000000999"],
        )
        lane = DiscordLane(runtime)
        await lane.start()
        try:
            async with asyncio.timeout(DEADLINE):
                await discord.connected.wait()
            await discord.post_message(DM_CHANNEL_ID, "hello?")

            def texts() -> list[str]:
                return [sent.text for sent in discord.sent_in(DM_CHANNEL_ID)]

            async with asyncio.timeout(DEADLINE):
                while not texts():
                    await asyncio.sleep(0.05)
            [told] = texts()
            code = code_in(told)
            approved = await runtime.engine.db.run(runtime.stores.pairings.approve, code)
            assert approved is not None and approved.platform_user_id == ALICE["id"]

            await discord.post_message(DM_CHANNEL_ID, "hello again")
            await discord.wait_for_texts(DM_CHANNEL_ID, [told, "**Ada**\nreply to: hello again"], DEADLINE)
            assert len(fake_openai.requests) == 1
        finally:
            await within_deadline(lane.stop(), "stopping the Discord lane")
