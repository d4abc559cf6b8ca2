"""/model on Discord: the conversation's model switches mid-conversation, the history goes along."""

from __future__ import annotations

from tests.discord.conftest import LaneFactory
from tests.discord.fake_discord import DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, message_text


async def test_model_switches_mid_conversation_with_the_history_intact(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane(models=[{"name": "smart", "model": "smart-model"}])

    for count, text in enumerate(["my name is Grace", "/model smart", "what is my name?"], start=1):
        await fake_discord.post_message(DM_CHANNEL_ID, text)
        await fake_discord.wait_until(lambda count=count: len(fake_discord.sent_in(DM_CHANNEL_ID)) >= count)

    chats = [request.json for request in fake_openai.requests if not request.is_summary]
    assert [body["model"] for body in chats] == ["gpt-4o-mini", "smart-model"]
    said = [message_text(message) for message in chats[1]["messages"]]
    assert any("my name is Grace" in text for text in said)
