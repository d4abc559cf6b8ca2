"""Starting against a Discord that is down, and gateway closes that need the operator."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from bot.runtime import Runtime
from channels.discord.lane import DiscordLane
from channels.web.app import create_app
from tests.discord.conftest import LaneFactory, eventually, lane_settings, spoken
from tests.discord.fake_discord import DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runtime import make_runtime


def closed_port_url(scheme: str) -> str:
    """An address on this machine where nothing listens: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"{scheme}://127.0.0.1:{port}"


async def healthz(runtime: Runtime) -> httpx.Response:
    """/healthz from the web lane's app, which serves whatever the Discord lane does."""
    transport = httpx.ASGITransport(app=create_app(runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://chorus.test") as client:
        return await client.get("/healthz")


@pytest_asyncio.fixture
async def runtime(
    tmp_path: Path, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> AsyncIterator[Runtime]:
    built = make_runtime(tmp_path, model_base_url=fake_openai.base_url, **lane_settings(fake_discord))
    yield built
    await built.aclose()


async def test_an_unreachable_discord_is_retried_while_the_web_lane_serves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="channels.discord.lane")
    runtime = make_runtime(
        tmp_path,
        discord_token="any-token",
        channels_discord_api_base=closed_port_url("http") + "/api/v10",
        channels_discord_gateway_url=closed_port_url("ws"),
    )
    lane = DiscordLane(runtime, retry_first=0.05)
    try:
        await lane.start()
        answer = await healthz(runtime)

        assert answer.status_code == 200
        discord_health = answer.json()["lanes"]["discord"]
        assert discord_health["state"] == "starting" and "unreachable" in discord_health["reason"]
        # It keeps trying, and says so.
        await eventually(lambda: len(unreachable_lines(caplog)) >= 3)
        assert "retrying in" in unreachable_lines(caplog)[0]
    finally:
        await lane.stop()
        await runtime.aclose()


async def test_a_discord_answering_503_at_startup_is_retried_until_it_recovers(
    runtime: Runtime, fake_discord: FakeDiscord
) -> None:
    fake_discord.failures = [503, 503]
    lane = DiscordLane(runtime, edit_interval=0.05, retry_first=0.05)
    try:
        await lane.start()
        assert runtime.lanes.snapshot()["discord"].state == "starting"
        await asyncio.wait_for(fake_discord.connected.wait(), 60)
        await fake_discord.post_message(DM_CHANNEL_ID, "you made it")

        await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: you made it")])
        assert [c.status for c in fake_discord.calls_to("GET", "/users/@me")] == [503, 503, 200]
        await eventually(lambda: runtime.lanes.snapshot()["discord"].state == "running")
        assert (await healthz(runtime)).json()["lanes"]["discord"]["state"] == "running"
    finally:
        await lane.stop()


async def test_a_disallowed_intent_marks_the_lane_failed_with_the_fix(
    runtime: Runtime, fake_discord: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    fake_discord.gateway.enabled_intents = 0  # Message Content intent not enabled in the portal
    lane = DiscordLane(runtime, retry_first=0.05)
    try:
        await lane.start()
        await fake_discord.wait_until(lambda: runtime.lanes.any_failed())

        answer = await healthz(runtime)
        assert answer.status_code == 503 and answer.json()["status"] == "failed"
        reason = answer.json()["lanes"]["discord"]["reason"]
        assert "Privileged Gateway Intents" in reason
        assert any("Privileged Gateway Intents" in r.getMessage() for r in caplog.records)
        assert [c.closed_by_server for c in fake_discord.gateway.connections] == [4014]
    finally:
        await lane.stop()


async def test_a_token_reset_while_running_marks_the_lane_failed(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    _, runtime = await start_lane()
    await eventually(lambda: runtime.lanes.snapshot()["discord"].state == "running")

    fake_discord.token = "reset-in-the-developer-portal"
    await fake_discord.gateway.close(4000, "Unknown error")

    await fake_discord.wait_until(lambda: runtime.lanes.any_failed())
    reason = runtime.lanes.snapshot()["discord"].reason or ""
    assert "4004" in reason and "CHORUS_DISCORD_TOKEN" in reason
    assert [c.closed_by_server for c in fake_discord.gateway.connections] == [4000, 4004]


def unreachable_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "Discord is unreachable" in r.getMessage()]


async def test_stopping_a_lane_that_waits_to_retry_is_immediate(tmp_path: Path) -> None:
    runtime = make_runtime(
        tmp_path, discord_token="any-token", channels_discord_api_base=closed_port_url("http") + "/api/v10"
    )
    # The next attempt would be a minute away.
    lane = DiscordLane(runtime, retry_first=60)
    try:
        await lane.start()
        await asyncio.wait_for(lane.stop(), 10)
    finally:
        await runtime.aclose()


async def test_a_discord_that_does_not_answer_does_not_hold_up_startup(
    runtime: Runtime, fake_discord: FakeDiscord
) -> None:
    fake_discord.silent = True
    lane = DiscordLane(runtime, edit_interval=0.05, retry_first=0.05, first_login_timeout=0.5)
    try:
        await asyncio.wait_for(lane.start(), 30)
        status = runtime.lanes.snapshot()["discord"]
        assert status.state == "starting" and "TimeoutError" in (status.reason or "")

        fake_discord.silent = False
        await asyncio.wait_for(fake_discord.connected.wait(), 60)
        await fake_discord.post_message(DM_CHANNEL_ID, "late but here")
        await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: late but here")])
    finally:
        await lane.stop()
