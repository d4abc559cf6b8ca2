"""Guild channels and threads: activation, allow-lists, bots, display names."""

from __future__ import annotations

from tests.discord.conftest import LaneFactory
from tests.discord.fake_discord import (
    ALICE,
    BOB,
    BOT,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    OTHER_BOT,
    THREAD_ID,
    FakeDiscord,
)
from tests.fakes.openai_server import FakeOpenAI, message_text

MENTION = f"<@{BOT['id']}>"


async def test_guild_answers_a_mention_and_keeps_unaddressed_messages_as_context(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    await fake_discord.post_message(CHANNEL_ID, "the deploy is on Friday", author=BOB)
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} when is the deploy?", nick="Ali", mentions=(BOT,))

    await fake_discord.wait_for_texts(CHANNEL_ID, ["reply to: Ali: when is the deploy?"])

    assert len(fake_openai.requests) == 1
    history = [(m["role"], message_text(m)) for m in fake_openai.requests[0].messages[1:]]
    assert history == [("user", "Bob: the deploy is on Friday"), ("user", "Ali: when is the deploy?")]
    # Posted by the persona through the channel webhook, under its own name.
    assert [(m.username, m.webhook_id is not None) for m in fake_discord.sent_in(CHANNEL_ID)] == [
        ("Ada", True)
    ]


async def test_a_reply_to_the_bot_counts_as_addressing_it(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} hi", mentions=(BOT,))
    await fake_discord.wait_for_texts(CHANNEL_ID, ["reply to: Alice: hi"])
    persona_message = fake_discord.payload_of(fake_discord.sent[0])

    await fake_discord.post_message(CHANNEL_ID, "and tomorrow?", replying_to=persona_message)

    answer = "reply to: Alice: > Ada: reply to: Alice: hi\nand tomorrow?"
    await fake_discord.wait_for_texts(CHANNEL_ID, ["reply to: Alice: hi", answer])
    last = fake_openai.requests[-1].messages[-1]
    assert message_text(last) == "Alice: > Ada: reply to: Alice: hi\nand tomorrow?"


async def test_a_thread_is_its_own_group_session(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    await fake_discord.post_message(CHANNEL_ID, "channel-only remark", author=BOB)
    await fake_discord.post_message(THREAD_ID, f"{MENTION} thread question", mentions=(BOT,))

    await fake_discord.wait_for_texts(THREAD_ID, ["reply to: Alice: thread question"])

    texts = [message_text(m) for m in fake_openai.requests[0].messages[1:]]
    assert texts == ["Alice: thread question"]
    assert fake_discord.texts_in(CHANNEL_ID) == []


async def test_bots_and_system_messages_are_ignored(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane(channels_discord_activation="always")
    await fake_discord.post_message(
        CHANNEL_ID, f"{MENTION} beep from a bot", author=OTHER_BOT, mentions=(BOT,)
    )
    await fake_discord.post_message(DM_CHANNEL_ID, "my own echo", author=BOT)
    pin_notice = fake_discord.message_payload(CHANNEL_ID, "", author=ALICE) | {"type": 6}
    await fake_discord.dispatch("MESSAGE_CREATE", pin_notice)
    await fake_discord.post_message(CHANNEL_ID, "a person speaks")

    await fake_discord.wait_for_texts(CHANNEL_ID, ["reply to: Alice: a person speaks"])

    assert len(fake_discord.sent) == 1
    assert [message_text(m) for m in fake_openai.requests[0].messages[1:]] == ["Alice: a person speaks"]


async def test_activation_always_answers_without_a_mention(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    await start_lane(channels_discord_activation="always")
    await fake_discord.post_message(CHANNEL_ID, "anyone there?")

    await fake_discord.wait_for_texts(CHANNEL_ID, ["reply to: Alice: anyone there?"])


async def test_allow_lists_limit_users_and_channels(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    # The thread is allowed through its parent channel.
    await start_lane(
        channels_discord_allowed_users=[ALICE["id"]],
        channels_discord_allowed_channels=[str(CHANNEL_ID)],
    )
    await fake_discord.post_message(DM_CHANNEL_ID, "let me in", author=BOB)
    await fake_discord.post_message(THREAD_ID, f"{MENTION} allowed", mentions=(BOT,))

    await fake_discord.wait_for_texts(THREAD_ID, ["reply to: Alice: allowed"])

    assert len(fake_discord.sent) == 1
    assert [message_text(m) for m in fake_openai.requests[0].messages[1:]] == ["Alice: allowed"]
