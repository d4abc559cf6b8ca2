"""/model on Telegram: the conversation's model switches mid-conversation, the history goes along."""

from __future__ import annotations

from bot.config import ModelChoiceSettings
from bot.runtime import Runtime
from channels.telegram.lane import TelegramLane
from tests.fakes.openai_server import FakeOpenAI, message_text
from tests.telegram.bot_api_server import FakeBotAPI, private_text


async def test_model_switches_mid_conversation_with_the_history_intact(
    lane: TelegramLane, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    runtime.settings.models = [ModelChoiceSettings(name="smart", model="smart-model")]
    bot_api.push(private_text(601, "my name is Grace"))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(601)) == 1)

    bot_api.push(private_text(601, "/model smart"))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(601)) == 2)
    bot_api.push(private_text(601, "what is my name?"))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(601)) == 3)
    bot_api.push(private_text(601, "/model default"))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(601)) == 4)
    bot_api.push(private_text(601, "and now?"))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(601)) == 5)

    assert "now speaks with smart (smart-model)" in bot_api.sent_texts(601)[1]
    chats = [request.json for request in fake_openai.requests if not request.is_summary]
    assert [body["model"] for body in chats] == ["gpt-4o-mini", "smart-model", "gpt-4o-mini"]
    said = [message_text(message) for message in chats[1]["messages"]]
    assert any("my name is Grace" in text for text in said)
