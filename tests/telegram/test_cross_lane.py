"""One person on the web and on Telegram: one conversation, and the same model request."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from bot.providers.openai import PURPOSE_HEADER
from bot.runtime import Runtime
from bot.turns.inbound import Actor, InboundMessage
from channels.drafts import CURSOR
from channels.telegram.lane import TelegramLane
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, message_text
from tests.support.runtime import make_runtime
from tests.telegram.bot_api_server import TOKEN, FakeBotAPI, private_text
from tests.telegram.conftest import ALBUM_DELAY, EDIT_INTERVAL


def chat_requests(server: FakeOpenAI) -> list[RecordedRequest]:
    """Turn requests only: after-turn work (memory, compaction) sends requests of its own."""
    return [request for request in server.requests if PURPOSE_HEADER.lower() not in request.headers]


@dataclass
class LinkedPerson:
    """Alice with a web visitor id and a Telegram account, linked to one person."""

    runtime: Runtime
    bot_api: FakeBotAPI
    telegram_id: int
    visitor_id: str = ""

    async def on_telegram(self, text: str) -> str:
        before = len(self.bot_api.sent_texts(self.telegram_id))
        self.bot_api.push(private_text(self.telegram_id, text, first_name="Alice"))

        def delivered() -> bool:
            texts = self.bot_api.sent_texts(self.telegram_id)
            return len(texts) > before and not texts[-1].endswith(CURSOR)

        await self.bot_api.wait_for(delivered)
        # Replies of a persona open with its name in bold; the rest is what the model said.
        return self.bot_api.sent_texts(self.telegram_id)[-1].removeprefix("Ada\n")

    async def on_web(self, text: str) -> str:
        # Exactly what the web lane hands over for a visitor's message.
        reply = await self.runtime.engine.respond(
            InboundMessage(
                lane="web",
                platform_message_id=uuid.uuid4().hex,
                chat_id=self.visitor_id,
                chat_kind="private",
                actor=Actor(user_id=self.visitor_id, display_name="Alice"),
                text=text,
            )
        )
        return reply.text

    async def link(self) -> None:
        self.visitor_id, _token = self.runtime.stores.visitors.create_visitor()
        shown = await self.on_telegram("/link")
        code = re.search(r"Your link code: `?(\w+)", shown)
        assert code is not None, shown
        answer = await self.on_web(f"/link {code.group(1)}")
        assert answer.startswith("Linked."), answer


async def conversation_ending_on(
    lane: str, tmp_path: Path, fake_openai: FakeOpenAI, bot_api: FakeBotAPI, telegram_id: int
) -> bytes:
    """Link, talk on the web, then ask the last question on `lane`; the request it caused."""
    home = tmp_path / lane
    home.mkdir()
    runtime = make_runtime(
        home,
        model_base_url=fake_openai.base_url,
        channels_telegram_token=TOKEN,
        channels_telegram_api_base=bot_api.base_url,
    )
    telegram = TelegramLane(runtime, edit_interval=EDIT_INTERVAL, album_delay=ALBUM_DELAY)
    await telegram.start()
    try:
        alice = LinkedPerson(runtime, bot_api, telegram_id)
        await alice.link()
        assert await alice.on_web("My favourite number is 42.") == ("reply to: My favourite number is 42.")
        question = "What is my favourite number?"
        answer = await (alice.on_telegram if lane == "telegram" else alice.on_web)(question)
        assert answer == f"reply to: {question}"
        return chat_requests(fake_openai)[-1].body
    finally:
        await telegram.stop()
        await runtime.aclose()


async def test_linked_person_continues_one_conversation_across_lanes(
    tmp_path: Path, fake_openai: FakeOpenAI, bot_api: FakeBotAPI
) -> None:
    runtime = make_runtime(
        tmp_path,
        model_base_url=fake_openai.base_url,
        channels_telegram_token=TOKEN,
        channels_telegram_api_base=bot_api.base_url,
    )
    telegram = TelegramLane(runtime, edit_interval=EDIT_INTERVAL, album_delay=ALBUM_DELAY)
    await telegram.start()
    try:
        alice = LinkedPerson(runtime, bot_api, 950)
        await alice.link()
        await alice.on_web("I am planning a trip to Lisbon.")
        await alice.on_telegram("Which month is best?")
        await alice.on_web("And where should I stay?")
    finally:
        await telegram.stop()
        await runtime.aclose()

    history = [message_text(m) for m in chat_requests(fake_openai)[-1].messages if m["role"] != "system"]
    assert history == [
        "I am planning a trip to Lisbon.",
        "reply to: I am planning a trip to Lisbon.",
        "Which month is best?",
        "reply to: Which month is best?",
        "And where should I stay?",
    ]


async def test_same_history_gives_a_byte_identical_request_from_either_lane(
    tmp_path: Path, fake_openai: FakeOpenAI, bot_api: FakeBotAPI
) -> None:
    from_telegram = await conversation_ending_on("telegram", tmp_path, fake_openai, bot_api, telegram_id=951)
    from_web = await conversation_ending_on("web", tmp_path, fake_openai, bot_api, telegram_id=952)

    assert b"My favourite number is 42." in from_telegram
    assert from_telegram == from_web
