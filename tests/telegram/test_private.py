"""Private chats: text, commands, personas, photos, documents and albums over polling."""

from __future__ import annotations

from bot.runtime import Runtime
from channels.telegram.lane import TelegramLane
from tests.fakes.openai_server import FakeOpenAI, last_user_text, message_text
from tests.telegram.bot_api_server import (
    FakeBotAPI,
    message,
    photo_sizes,
    private_chat,
    private_text,
    user,
)
from tests.telegram.conftest import jpeg


async def test_private_text_gets_a_streamed_reply_with_typing(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    bot_api.push(private_text(501, "hello there"))

    await bot_api.wait_for(lambda: bot_api.sent_texts(501) == ["Ada\nreply to: hello there"])

    assert last_user_text(fake_openai.requests[0].json) == "hello there"
    typing = bot_api.calls_to("sendChatAction")
    assert typing and typing[0].params == {"chat_id": "501", "action": "typing"}
    sent = bot_api.calls_to("sendMessage")
    assert len(sent) == 1
    assert "reply_parameters" not in sent[0].params  # no quoting in a private chat


async def test_commands_come_from_the_engine_and_are_registered(
    lane: TelegramLane, runtime: Runtime, bot_api: FakeBotAPI
) -> None:
    registered = bot_api.calls_to("setMyCommands")[0].params["commands"]
    assert [(c["command"], c["description"]) for c in registered] == (runtime.engine.commands.describe())
    assert "persona" in [c["command"] for c in registered]
    bot_api.push(private_text(502, "/help"))

    texts = await bot_api.wait_for(lambda: bot_api.sent_texts(502))

    assert texts == [runtime.engine.commands.help_text()]


async def test_persona_switch_changes_who_answers(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    bot_api.push(private_text(503, "/persona captain"))
    await bot_api.wait_for(lambda: bot_api.sent_texts(503))
    assert bot_api.sent_texts(503)[0].startswith("Switched to Captain Reed (captain).")

    bot_api.push(private_text(503, "where to?"))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(503)) == 2)

    system = message_text(fake_openai.requests[-1].messages[0])
    assert "You are Captain Reed" in system
    assert fake_openai.requests[-1].json["temperature"] == 0.9


async def test_photo_is_fetched_at_its_largest_size(
    lane: TelegramLane, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    sizes = photo_sizes("ph1", [(90, 60, 900), (800, 600, 8000), (320, 240, 3000)])
    bot_api.add_file("ph1-800", jpeg(80, 60), "photos/file_1.jpg")
    update = message(private_chat(504), user(504), photo=sizes, caption="what is this?", message_id=71)
    bot_api.push(update)

    await bot_api.wait_for(lambda: bot_api.sent_texts(504))

    assert [call.params["file_id"] for call in bot_api.calls_to("getFile")] == ["ph1-800"]
    assert [call.params["path"] for call in bot_api.calls_to("download")] == ["photos/file_1.jpg"]
    stored = runtime.stores.messages.find_platform_message("telegram", "504", "71")
    assert stored is not None and stored.content == "what is this?"
    attachments = runtime.stores.messages.attachments_for([stored.id or 0])[stored.id or 0]
    assert [(a.kind, a.mime_type) for a in attachments] == [("image", "image/jpeg")]
    assert "what is this?" in message_text(fake_openai.requests[0].messages[-1])


async def test_document_text_reaches_the_model_and_caption_is_the_message(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    bot_api.add_file("doc1", b"The launch code is AZURE-42.", "documents/notes.txt")
    document = {
        "file_id": "doc1",
        "file_unique_id": "doc1-u",
        "file_name": "notes.txt",
        "mime_type": "text/plain",
        "file_size": 28,
    }
    bot_api.push(message(private_chat(505), user(505), document=document, caption="summarise"))

    await bot_api.wait_for(lambda: bot_api.sent_texts(505))

    request = fake_openai.requests[0]
    assert "AZURE-42" in request.body.decode()
    assert "summarise" in message_text(request.messages[-1])


async def test_album_becomes_one_message_with_every_photo(
    lane: TelegramLane, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    chat, sender = private_chat(506), user(506)
    for index, color in enumerate(("red", "blue", "green")):
        bot_api.add_file(f"al{index}-640", jpeg(64, 48, color), f"photos/album_{index}.jpg")
    items = [
        message(
            chat,
            sender,
            photo=photo_sizes(f"al{index}", [(90, 60, 500), (640, 480, 5000)]),
            media_group_id="album-1",
            message_id=81 + index,
            **({"caption": "our trip"} if index == 0 else {}),
        )
        for index in range(3)
    ]
    bot_api.push(*items)

    await bot_api.wait_for(lambda: bot_api.sent_texts(506))

    assert len(fake_openai.requests) == 1
    assert len(bot_api.calls_to("sendMessage")) == 1
    stored = runtime.stores.messages.find_platform_message("telegram", "506", "81")
    assert stored is not None and stored.content == "our trip"
    attachments = runtime.stores.messages.attachments_for([stored.id or 0])[stored.id or 0]
    assert len(attachments) == 3
    assert runtime.stores.messages.find_platform_message("telegram", "506", "82") is None


async def test_link_code_is_monospace_without_a_tappable_command(
    lane: TelegramLane, bot_api: FakeBotAPI
) -> None:
    bot_api.push(private_text(507, "/link"))

    [shown] = await bot_api.wait_for(lambda: [m.shown for m in bot_api.messages(507)])

    code = shown.text.split("Your link code: ")[1].split()[0]
    assert shown.spans("code") == [code, f"/link {code}"]
    # Telegram makes /commands in plain text tappable; inside a code entity it does not.
    assert shown.spans("bot_command") == []
    assert "`" not in shown.text
