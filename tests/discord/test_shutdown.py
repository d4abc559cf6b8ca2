"""Shutdown with a Discord reply streaming: the draft is finished and the gateway closes 1000."""

from __future__ import annotations

import asyncio
from pathlib import Path

import uvicorn
from sqlmodel import Session, select

from bot.cli.serve import Server, Service
from bot.storage.models import Message
from channels.discord.lane import DiscordLane
from channels.web.app import create_app
from tests.discord.conftest import lane_settings
from tests.discord.fake_discord import DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as ModelReply
from tests.support.runtime import make_runtime

SLOW_REPLY = ModelReply(" ".join(f"word{n}" for n in range(400)), delay=0.25)


async def test_shutdown_finishes_the_draft_and_closes_the_gateway_cleanly(
    tmp_path: Path, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    runtime = make_runtime(
        tmp_path,
        model_base_url=fake_openai.base_url,
        shutdown_grace_seconds=0.5,
        **lane_settings(fake_discord),
    )
    lane = DiscordLane(runtime, edit_interval=0.05)
    server = Server(uvicorn.Config(create_app(runtime), host="127.0.0.1", port=0, log_level="warning"))
    service = Service(runtime, [lane], server)
    fake_openai.script(SLOW_REPLY)
    running = asyncio.create_task(service.run())
    await asyncio.wait_for(fake_discord.connected.wait(), 60)

    await fake_discord.post_message(DM_CHANNEL_ID, "tell me everything")
    await fake_discord.wait_until(lambda: "▌" in "".join(fake_discord.texts_in(DM_CHANNEL_ID)), 60)
    service.request_stop()
    await asyncio.wait_for(running, 60)

    with Session(runtime.database) as db:
        [stored] = db.exec(select(Message).where(Message.role == "assistant")).all()
    assert stored.status == "interrupted" and stored.content
    [shown] = fake_discord.texts_in(DM_CHANNEL_ID)
    assert stored.content.strip() in shown and "[Cut off: the server was restarting." in shown
    assert "▌" not in shown
    assert fake_discord.gateway.client_close_codes == [1000]
