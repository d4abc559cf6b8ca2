"""Stickers, locations and polls: a short answer in private, quiet in groups."""

from __future__ import annotations

from typing import Any

import pytest

from bot.runtime import Runtime
from channels.telegram.lane import TelegramLane
from tests.fakes.openai_server import FakeOpenAI
from tests.telegram.bot_api_server import (
    BOT_ID,
    BOT_USERNAME,
    FakeBotAPI,
    group_chat,
    location,
    message,
    poll,
    private_chat,
    private_text,
    sticker,
    user,
)

GROUP = -100999
KINDS: list[tuple[str, dict[str, Any], str]] = [
    ("sticker", sticker(), "stickers"),
    ("location", location(), "locations"),
    ("poll", poll(), "polls"),
]


@pytest.mark.parametrize(("field", "payload", "noun"), KINDS, ids=[kind[0] for kind in KINDS])
async def test_private_chat_gets_a_short_clear_answer(
    lane: TelegramLane,
    runtime: Runtime,
    bot_api: FakeBotAPI,
    fake_openai: FakeOpenAI,
    field: str,
    payload: dict[str, Any],
    noun: str,
) -> None:
    bot_api.push(message(private_chat(901), user(901), **{field: payload}))

    [answer] = await bot_api.wait_for(lambda: bot_api.sent_texts(901))

    assert answer.startswith(f"I can't read {noun} yet.")
    assert not fake_openai.requests
    assert runtime.stores.sessions.list_sessions() == []  # nothing stored


async def test_group_ignores_them_unless_addressed(
    lane: TelegramLane, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    bot_message = {
        "message_id": 950,
        "date": 0,
        "chat": group_chat(GROUP),
        "from": {"id": BOT_ID, "is_bot": True, "first_name": "Chorus", "username": BOT_USERNAME},
        "text": "earlier answer",
    }
    bot_api.push(message(group_chat(GROUP), user(902, "Bob"), sticker=sticker(), message_id=951))
    bot_api.push(message(group_chat(GROUP), user(902, "Bob"), location=location(), message_id=952))
    bot_api.push(
        message(
            group_chat(GROUP),
            user(902, "Bob"),
            sticker=sticker(),
            reply_to_message=bot_message,
            message_id=953,
        )
    )
    # A later text message shows the earlier ones were all handled.
    bot_api.push(message(group_chat(GROUP), user(902, "Bob"), f"@{BOT_USERNAME} hi", message_id=954))

    await bot_api.wait_for(lambda: len(bot_api.sent_texts(GROUP)) == 2)

    texts = bot_api.sent_texts(GROUP)
    assert sorted(texts)[0] == "Ada\nreply to: Bob: @chorus_bot hi"
    assert sorted(texts)[1].startswith("I can't read stickers yet.")
    replies = [
        call.params.get("reply_parameters", {}).get("message_id") for call in bot_api.calls_to("sendMessage")
    ]
    assert 953 in replies and 951 not in replies and 952 not in replies
    assert len(fake_openai.requests) == 1


async def test_text_after_a_sticker_is_answered_normally(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    bot_api.push(message(private_chat(903), user(903), sticker=sticker()), private_text(903, "hello"))

    await bot_api.wait_for(lambda: len(bot_api.sent_texts(903)) == 2)

    assert bot_api.sent_texts(903)[1] == "Ada\nreply to: hello"
