"""Addressing the bot in a server: commands, its managed role, a bare mention."""

from __future__ import annotations

from tests.discord.conftest import LaneFactory
from tests.discord.fake_discord import BOT, BOT_ROLE_ID, CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, message_text

MENTION = f"<@{BOT['id']}>"
ROLE_MENTION = f"<@&{BOT_ROLE_ID}>"


async def test_a_command_after_a_mention_runs_in_a_server_channel(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} /persona sage", mentions=(BOT,))

    await fake_discord.wait_until(lambda: len(fake_discord.sent_in(CHANNEL_ID)) == 1)
    assert fake_discord.texts_in(CHANNEL_ID)[0].startswith("Switched to Sage (sage).")
    assert fake_openai.requests == []


async def test_a_plain_command_runs_where_activation_is_always(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    await start_lane(channels_discord_activation="always")
    await fake_discord.post_message(CHANNEL_ID, "/persona captain")

    await fake_discord.wait_until(lambda: len(fake_discord.sent_in(CHANNEL_ID)) == 1)
    assert fake_discord.texts_in(CHANNEL_ID)[0].startswith("Switched to Captain Reed (captain).")


async def test_a_plain_command_is_not_for_the_bot_where_it_waits_for_a_mention(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    await fake_discord.post_message(CHANNEL_ID, "/persona captain")
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} who speaks?", mentions=(BOT,))

    await fake_discord.wait_for_texts(CHANNEL_ID, ["reply to: Alice: who speaks?"])
    assert "You are Ada" in message_text(fake_openai.requests[0].messages[0])


async def test_a_mention_of_the_bots_managed_role_counts_as_a_mention(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    await fake_discord.post_message(
        CHANNEL_ID, f"{ROLE_MENTION} are you there?", mention_roles=(BOT_ROLE_ID,)
    )

    await fake_discord.wait_for_texts(CHANNEL_ID, ["reply to: Alice: are you there?"])
    assert message_text(fake_openai.requests[0].messages[-1]) == "Alice: are you there?"


async def test_a_bare_mention_gets_the_greeting(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    await fake_discord.post_message(CHANNEL_ID, MENTION, mentions=(BOT,))
    await fake_discord.post_message(CHANNEL_ID, f" {ROLE_MENTION} ", mention_roles=(BOT_ROLE_ID,))

    await fake_discord.wait_until(lambda: len(fake_discord.sent_in(CHANNEL_ID)) == 2)
    for text in fake_discord.texts_in(CHANNEL_ID):
        assert text.startswith("Hello! I'm Ada.") and "empty" not in text
    assert fake_openai.requests == []
