"""An event discord.py cannot parse ends one gateway connection, not the Discord lane."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from channels.web.app import create_host_app
from tests.discord.conftest import LaneFactory, eventually, spoken
from tests.discord.fake_discord import DM_CHANNEL_ID, FakeDiscord


async def test_an_unparsable_event_reconnects_and_the_next_message_is_answered(
    start_lane: LaneFactory, fake_discord: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    _, runtime = await start_lane()
    gateway = fake_discord.gateway
    fake_discord.connected.clear()

    await fake_discord.edit_with_null_member()

    # The connection the event broke is closed and a new one identifies.
    await asyncio.wait_for(fake_discord.connected.wait(), 60)
    assert len(gateway.identifies) == 2
    failures = [
        record
        for record in caplog.records
        if record.name == "channels.discord.lane" and record.levelno >= logging.ERROR
    ]
    assert len(failures) == 1 and failures[0].exc_info is not None
    assert failures[0].exc_info[0] is TypeError
    assert "reconnecting in" in failures[0].getMessage()

    await fake_discord.post_message(DM_CHANNEL_ID, "still there?")
    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: still there?")])
    await eventually(lambda: runtime.lanes.snapshot()["discord"].state == "running")


async def test_the_lane_shows_down_while_it_waits_to_reconnect(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    lane, runtime = await start_lane()
    lane._backoff.first = 30.0  # the wait long enough to look at

    await fake_discord.edit_with_null_member()

    await eventually(lambda: runtime.lanes.snapshot()["discord"].state == "down")
    reason = runtime.lanes.snapshot()["discord"].reason or ""
    assert "TypeError" in reason and "reconnecting in 3" in reason
    # Not a failure the operator must fix: /healthz answers 200 and says the lane is down.
    transport = httpx.ASGITransport(app=create_host_app(runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://chorus") as client:
        health = await client.get("/healthz")
    assert health.status_code == 200
    assert health.json()["lanes"]["discord"]["state"] == "down"


async def test_a_sharded_client_that_a_shard_closed_logs_in_again_and_answers(
    start_lane: LaneFactory, fake_discord: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    # discord.py closes a sharded client (and its HTTP session) when a shard's loop raises.
    await start_lane(channels_discord_shard_count=1)
    gateway = fake_discord.gateway
    fake_discord.connected.clear()

    await fake_discord.edit_with_null_member()

    await asyncio.wait_for(fake_discord.connected.wait(), 60)
    assert len(gateway.identifies) == 2
    await fake_discord.post_message(DM_CHANNEL_ID, "and now?")
    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: and now?")])
    failures = [r for r in caplog.records if r.name == "channels.discord.lane" and r.levelno >= logging.ERROR]
    assert len(failures) == 1 and failures[0].exc_info is not None
