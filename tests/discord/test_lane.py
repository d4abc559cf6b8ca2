from __future__ import annotations

from tests.discord.conftest import LaneFactory
from tests.discord.fake_discord import ALICE, DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI


async def test_dm_is_answered_in_the_persons_session(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    _, runtime = await start_lane()
    sent = await fake_discord.post_message(DM_CHANNEL_ID, "hello there")

    await fake_discord.wait_for_texts(DM_CHANNEL_ID, ["reply to: hello there"])

    assert fake_discord.sent_in(DM_CHANNEL_ID)[0].reference_id == int(sent["id"])
    assert fake_discord.calls_to("POST", f"/channels/{DM_CHANNEL_ID}/typing")
    assert fake_discord.identify is not None and fake_discord.identify["intents"] & (1 << 15)
    account = runtime.store.find_account("discord", ALICE["id"])
    assert account is not None
    assert fake_openai.requests[-1].messages[-1]["content"] == "hello there"
