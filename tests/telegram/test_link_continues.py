"""Linking the web widget and Telegram keeps the conversation the person was just having.

Both lanes run for real: aiogram against the Bot API stand-in, and the web lane's HTTP API.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bot.providers.openai import PURPOSE_HEADER
from bot.runtime import Runtime
from channels.drafts import CURSOR
from channels.telegram.lane import TelegramLane
from channels.web.app import create_app
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, message_text
from tests.support.runtime import make_runtime
from tests.telegram.bot_api_server import TOKEN, FakeBotAPI, private_text
from tests.telegram.conftest import ALBUM_DELAY, EDIT_INTERVAL
from tests.web.helpers import WebVisitor

# Generous: the machine running the suite may be loaded.
DEADLINE = 60.0
TELEGRAM_FIRST = "I keep bees on my balcony."
WEB_FIRST = "I am planning a trip to Lisbon."
WEB_SECOND = "I fly out on the third of May."
QUESTION = "When do I fly?"


@dataclass
class Alice:
    """One person with a web visitor and a Telegram account, not yet linked."""

    runtime: Runtime
    bot_api: FakeBotAPI
    telegram_id: int
    web: WebVisitor

    async def on_telegram(self, text: str) -> str:
        before = len(self.bot_api.sent_texts(self.telegram_id))
        self.bot_api.push(private_text(self.telegram_id, text, first_name="Alice"))

        def delivered() -> bool:
            texts = self.bot_api.sent_texts(self.telegram_id)
            return len(texts) > before and not texts[-1].endswith(CURSOR)

        await self.bot_api.wait_for(delivered, timeout=DEADLINE)
        # Replies of a persona open with its name in bold; the rest is what the model said.
        return self.bot_api.sent_texts(self.telegram_id)[-1].removeprefix("Ada\n")

    async def on_web(self, text: str) -> str:
        final = (await self.web.say(text))[-1]
        await self.web.refresh()
        return str(final.data["text"])

    async def on(self, lane: str, text: str) -> str:
        return await (self.on_telegram if lane == "telegram" else self.on_web)(text)


@asynccontextmanager
async def alice_on_both_lanes(
    home: Path, fake_openai: FakeOpenAI, bot_api: FakeBotAPI, telegram_id: int
) -> AsyncIterator[Alice]:
    home.mkdir()
    runtime = make_runtime(
        home,
        model_base_url=fake_openai.base_url,
        channels_telegram_token=TOKEN,
        channels_telegram_api_base=bot_api.base_url,
    )
    telegram = TelegramLane(runtime, edit_interval=EDIT_INTERVAL, album_delay=ALBUM_DELAY)
    await telegram.start()
    client = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(runtime)), base_url="http://chat.test"
    )
    try:
        yield Alice(runtime, bot_api, telegram_id, await WebVisitor.start(client, name="Alice"))
    finally:
        await client.aclose()
        await telegram.stop()
        await runtime.aclose()


def last_turn(server: FakeOpenAI) -> RecordedRequest:
    """The last turn request: after-turn work (memory, compaction) sends requests of its own."""
    return [request for request in server.requests if PURPOSE_HEADER.lower() not in request.headers][-1]


def history_of(request: RecordedRequest) -> list[str]:
    return [message_text(m) for m in request.messages if m["role"] != "system"]


def code_in(shown: str) -> str:
    found = re.search(r"Your link code: `?(\w+)", shown)
    assert found is not None, shown
    return found.group(1)


async def web_newer_then_link(alice: Alice) -> str:
    """Telegram history, then a newer web conversation; the code is shown on the web."""
    await alice.on_telegram(TELEGRAM_FIRST)
    await alice.on_web(WEB_FIRST)
    await alice.on_web(WEB_SECOND)
    web_session = alice.web.session_id
    linked = await alice.on_telegram(f"/link {code_in(await alice.on_web('/link'))}")
    assert linked.startswith("Linked. Your private chats on telegram, web now share one conversation.")
    assert "It continues your most recent one" in linked
    assert alice.web.session_id == web_session
    return web_session


@pytest.mark.parametrize("asked_on", ["telegram", "web"])
async def test_the_newer_web_conversation_continues_on_telegram(
    asked_on: str, tmp_path: Path, fake_openai: FakeOpenAI, bot_api: FakeBotAPI
) -> None:
    async with alice_on_both_lanes(tmp_path / asked_on, fake_openai, bot_api, 960) as alice:
        await web_newer_then_link(alice)
        assert await alice.on(asked_on, QUESTION) == f"reply to: {QUESTION}"
        assert history_of(last_turn(fake_openai)) == [
            WEB_FIRST,
            f"reply to: {WEB_FIRST}",
            WEB_SECOND,
            f"reply to: {WEB_SECOND}",
            QUESTION,
        ]
        # The Telegram conversation was set aside, not lost: recall finds it from either lane.
        assert TELEGRAM_FIRST in await alice.on_web("/recall bees balcony")
        assert TELEGRAM_FIRST in await alice.on_telegram("/recall bees balcony")


async def test_after_linking_both_lanes_send_a_byte_identical_request(
    tmp_path: Path, fake_openai: FakeOpenAI, bot_api: FakeBotAPI
) -> None:
    bodies = []
    for asked_on, telegram_id in (("telegram", 961), ("web", 962)):
        async with alice_on_both_lanes(tmp_path / asked_on, fake_openai, bot_api, telegram_id) as alice:
            await web_newer_then_link(alice)
            await alice.on(asked_on, QUESTION)
            bodies.append(last_turn(fake_openai).body)
    assert WEB_SECOND.encode() in bodies[0]
    assert bodies[0] == bodies[1]


async def test_a_newer_telegram_conversation_continues_on_the_web(
    tmp_path: Path, fake_openai: FakeOpenAI, bot_api: FakeBotAPI
) -> None:
    bodies = []
    for asked_on, telegram_id in (("telegram", 963), ("web", 964)):
        async with alice_on_both_lanes(tmp_path / asked_on, fake_openai, bot_api, telegram_id) as alice:
            await alice.on_web(WEB_FIRST)
            old_web_session = alice.web.session_id
            await alice.on_telegram(TELEGRAM_FIRST)
            # The code is shown on Telegram and entered in the widget, which then follows the session.
            linked = await alice.on_web(f"/link {code_in(await alice.on_telegram('/link'))}")
            assert linked.startswith("Linked.") and old_web_session[:8] in linked
            assert alice.web.session_id != old_web_session
            texts = [message["text"] for message in (await alice.web.history())["messages"]]
            assert texts[:2] == [TELEGRAM_FIRST, f"reply to: {TELEGRAM_FIRST}"]
            # The web conversation it replaced stays readable by its visitor.
            earlier = await alice.web.get(f"/api/sessions/{old_web_session}/messages")
            assert earlier.status_code == 200 and earlier.json()["messages"][0]["text"] == WEB_FIRST
            await alice.on(asked_on, "What do I keep?")
            bodies.append(last_turn(fake_openai).body)
            assert history_of(last_turn(fake_openai)) == [
                TELEGRAM_FIRST,
                f"reply to: {TELEGRAM_FIRST}",
                "What do I keep?",
            ]
    assert bodies[0] == bodies[1]
