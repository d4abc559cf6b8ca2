"""Sharding: each process connects its shards, and answers the servers Discord sends to them."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from bot.errors import ConfigError
from bot.runtime import Runtime
from tests.discord.conftest import LaneFactory, spoken
from tests.discord.fake_discord import (
    BOT,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    GUILD_ID,
    SECOND_CHANNEL_ID,
    SECOND_GUILD_ID,
    FakeDiscord,
)
from tests.discord.fake_gateway import shard_of
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runtime import make_settings


def chats_answered(runtime: Runtime) -> list[str]:
    """The chats whose messages this process stored and answered."""
    with runtime.database.connect() as connection:
        rows = connection.execute(
            text("SELECT DISTINCT platform_chat_id FROM messages WHERE role = 'user' ORDER BY 1")
        )
        return [row[0] for row in rows]


async def test_two_processes_with_a_shard_each_answer_only_their_servers(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    assert shard_of(SECOND_GUILD_ID, 2) == 0 and shard_of(GUILD_ID, 2) == 1
    # Two `chorus serve` processes with their own databases, so each one's answers are its own.
    _, first = await start_lane(channels_discord_shard_count=2, channels_discord_shard_ids=[0])
    _, second = await start_lane(channels_discord_shard_count=2, channels_discord_shard_ids=[1])
    await fake_discord.wait_until(lambda: fake_discord.gateway.open_shards() == [(0, 2), (1, 2)])
    assert sorted(identify["shard"] for identify in fake_discord.gateway.identifies) == [[0, 2], [1, 2]]

    await fake_discord.post_message(CHANNEL_ID, f"<@{BOT['id']}> from the first server", mentions=(BOT,))
    await fake_discord.post_message(SECOND_CHANNEL_ID, f"<@{BOT['id']}> from the second", mentions=(BOT,))
    await fake_discord.post_message(DM_CHANNEL_ID, "a direct message")
    await fake_discord.wait_until(
        lambda: (
            fake_discord.texts_in(CHANNEL_ID) == ["reply to: Alice: from the first server"]
            and fake_discord.texts_in(SECOND_CHANNEL_ID) == ["reply to: Alice: from the second"]
            and fake_discord.texts_in(DM_CHANNEL_ID) == [spoken("reply to: a direct message")]
        )
    )

    # Shard 0 has the second server and every DM; shard 1 the first server. Nothing twice.
    assert chats_answered(first) == sorted([str(SECOND_CHANNEL_ID), str(DM_CHANNEL_ID)])
    assert chats_answered(second) == [str(CHANNEL_ID)]
    assert len(fake_openai.requests) == 3


async def test_one_process_can_run_every_shard(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    _, runtime = await start_lane(channels_discord_shard_count=2)
    await fake_discord.wait_until(lambda: fake_discord.gateway.open_shards() == [(0, 2), (1, 2)])

    await fake_discord.post_message(CHANNEL_ID, f"<@{BOT['id']}> first", mentions=(BOT,))
    await fake_discord.post_message(SECOND_CHANNEL_ID, f"<@{BOT['id']}> second", mentions=(BOT,))
    await fake_discord.wait_until(
        lambda: (
            fake_discord.texts_in(CHANNEL_ID) == ["reply to: Alice: first"]
            and fake_discord.texts_in(SECOND_CHANNEL_ID) == ["reply to: Alice: second"]
        )
    )
    assert chats_answered(runtime) == sorted([str(CHANNEL_ID), str(SECOND_CHANNEL_ID)])


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"channels_discord_shard_ids": [0]}, "needs channels.discord.shard_count"),
        ({"channels_discord_shard_count": 2, "channels_discord_shard_ids": [2]}, "not shards of"),
        ({"channels_discord_shard_count": 0}, "shard_count"),
    ],
)
def test_shard_settings_that_cannot_work_are_refused(
    tmp_path: Path, overrides: dict[str, object], problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem):
        make_settings(tmp_path, discord_token="t", **overrides)
