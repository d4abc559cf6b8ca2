"""The Bot API stand-in applies Telegram's rules, checked with aiogram's real client."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.enums import ParseMode
from aiogram.exceptions import TelegramBadRequest, TelegramConflictError, TelegramRetryAfter
from aiogram.types import MessageEntity

from tests.telegram.bot_api_server import TOKEN, FakeBotAPI, flood, private_text

CHAT = 42
GROUP = -10042


@pytest.fixture
async def bot(bot_api: FakeBotAPI) -> AsyncIterator[Bot]:
    client = Bot(TOKEN, session=AiohttpSession(api=TelegramAPIServer.from_base(bot_api.base_url)))
    yield client
    await client.session.close()


async def test_updates_are_served_until_a_later_offset_confirms_them(bot: Bot, bot_api: FakeBotAPI) -> None:
    first, second = private_text(CHAT, "one"), private_text(CHAT, "two")
    bot_api.push(first, second)

    again = [update.update_id for update in await bot.get_updates(timeout=0)]
    assert again == [update.update_id for update in await bot.get_updates(timeout=0)]
    confirmed = await bot.get_updates(offset=first["update_id"] + 1, timeout=0)

    assert again == [first["update_id"], second["update_id"]]
    assert [update.update_id for update in confirmed] == [second["update_id"]]
    assert [u.update_id for u in await bot.get_updates(timeout=0)] == [second["update_id"]]
    assert await bot.get_updates(offset=second["update_id"] + 1, timeout=0) == []


async def test_webhook_blocks_polling(bot: Bot) -> None:
    await bot.set_webhook("https://bot.example.org/hook")
    with pytest.raises(TelegramConflictError):
        await bot.get_updates(timeout=0)


async def test_entities_are_checked_in_utf16_units(bot: Bot, bot_api: FakeBotAPI) -> None:
    text = "go 🚀 now"  # the rocket is two UTF-16 units: offsets 3 and 4
    sent = await bot.send_message(CHAT, text, entities=[MessageEntity(type="bold", offset=3, length=2)])
    assert bot_api.messages(CHAT)[0].shown.spans("bold") == ["🚀"]
    assert sent.text == text

    for bad, reason in [
        (MessageEntity(type="bold", offset=3, length=1), "middle of a UTF-16 symbol"),
        (MessageEntity(type="bold", offset=4, length=2), "middle of a UTF-16 symbol"),
        (MessageEntity(type="bold", offset=6, length=9), "ends after the end of the text"),
        (MessageEntity(type="bold", offset=20, length=1), "begins after the end of the text"),
        (MessageEntity(type="shiny", offset=0, length=2), "Unsupported entity type"),
        (MessageEntity(type="text_link", offset=0, length=2), "needs a url"),
    ]:
        with pytest.raises(TelegramBadRequest, match=reason):
            await bot.send_message(CHAT, text, entities=[bad])


async def test_legacy_markdown_behaves_as_telegrams(bot: Bot, bot_api: FakeBotAPI) -> None:
    await bot.send_message(CHAT, "call my_helper_function or **this**", parse_mode=ParseMode.MARKDOWN)
    shown = bot_api.messages(CHAT)[0].shown
    assert shown.text == "call myhelperfunction or this"
    assert shown.spans("italic") == ["helper"] and shown.spans("bold") == []

    await bot.send_message(CHAT, "ask @chorus_test_bot now", parse_mode=ParseMode.MARKDOWN)
    assert bot_api.sent_texts(CHAT)[1] == "ask @chorustestbot now"
    with pytest.raises(TelegramBadRequest, match="can't parse entities: Can't find end of the entity"):
        await bot.send_message(CHAT, "use snake_case names", parse_mode=ParseMode.MARKDOWN)


async def test_message_limits_and_edits(bot: Bot, bot_api: FakeBotAPI) -> None:
    with pytest.raises(TelegramBadRequest, match="message is too long"):
        await bot.send_message(CHAT, "x" * 4097)
    with pytest.raises(TelegramBadRequest, match="message text is empty"):
        await bot.send_message(CHAT, " \n ")
    sent = await bot.send_message(CHAT, "draft")
    with pytest.raises(TelegramBadRequest, match="message is not modified"):
        await bot.edit_message_text("draft", chat_id=CHAT, message_id=sent.message_id)
    bot_api.delete_message(CHAT, sent.message_id)
    with pytest.raises(TelegramBadRequest, match="message to edit not found"):
        await bot.edit_message_text("final", chat_id=CHAT, message_id=sent.message_id)


async def test_flood_control_answers_429_with_retry_after(bot: Bot, bot_api: FakeBotAPI) -> None:
    bot_api.fail_next("sendMessage", flood(7))
    with pytest.raises(TelegramRetryAfter) as refused:
        await bot.send_message(CHAT, "hi")
    assert refused.value.retry_after == 7

    for index in range(20):
        await bot.send_message(GROUP, f"message {index}")
    with pytest.raises(TelegramRetryAfter) as limited:
        await bot.send_message(GROUP, "one too many")
    assert 1 <= limited.value.retry_after <= 61


async def test_message_drafts(bot: Bot, bot_api: FakeBotAPI) -> None:
    assert await bot.send_message_draft(CHAT, draft_id=7, text="", can_stop=True) is True  # "Thinking…"
    await bot.send_message_draft(
        CHAT, draft_id=7, text="Half a thought", entities=[MessageEntity(type="italic", offset=0, length=4)]
    )
    [draft] = bot_api.drafts(CHAT)
    assert [shown.text for shown in draft.history] == ["", "Half a thought"]
    assert draft.shown.spans("italic") == ["Half"] and draft.visible

    await bot.send_message(CHAT, "Half a thought, finished.")
    assert not draft.visible

    with pytest.raises(TelegramBadRequest, match="draft_id must be non-zero"):
        await bot.send_message_draft(CHAT, draft_id=0, text="x")
    with pytest.raises(TelegramBadRequest, match="private chats"):
        await bot.send_message_draft(GROUP, draft_id=1, text="x")
    with pytest.raises(TelegramBadRequest, match="ends after the end of the text"):
        await bot.send_message_draft(
            CHAT, draft_id=8, text="x", entities=[MessageEntity(type="bold", offset=0, length=5)]
        )
