"""Reminders on Discord: set with /remind in a DM or thread, posted there by discord.py when due."""

from __future__ import annotations

from sqlalchemy import text

from tests.discord.conftest import LaneFactory, eventually
from tests.discord.fake_discord import BOT, CHANNEL_ID, DM_CHANNEL_ID, THREAD_ID, FakeDiscord

MENTION = f"<@{BOT['id']}>"


def states(runtime) -> list[tuple[str, str | None, str | None]]:  # type: ignore[no-untyped-def]
    with runtime.database.connect() as connection:
        rows = connection.execute(text("SELECT state, platform_message_id, chat_id FROM reminders")).all()
    return [tuple(row) for row in rows]


async def test_a_reminder_is_posted_in_the_dm_and_the_thread_it_was_set_in(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    _, runtime = await start_lane()
    await fake_discord.post_message(DM_CHANNEL_ID, "/remind 1s stretch")
    await fake_discord.post_message(THREAD_ID, f"{MENTION} /remind 2s drink water", mentions=(BOT,))

    await fake_discord.wait_until(
        lambda: any("⏰ stretch" in t for t in fake_discord.texts_in(DM_CHANNEL_ID))
    )
    await fake_discord.wait_until(
        lambda: any("⏰ drink water" in t for t in fake_discord.texts_in(THREAD_ID))
    )
    await eventually(lambda: [s[0] for s in states(runtime)] == ["delivered", "delivered"])

    posted = {
        str(m.id)
        for channel in (DM_CHANNEL_ID, THREAD_ID)
        for m in fake_discord.sent_in(channel)
        if m.text.endswith(("⏰ stretch", "⏰ drink water"))
    }
    assert {message_id for _, message_id, _ in states(runtime)} == posted
    assert {chat for _, _, chat in states(runtime)} == {str(DM_CHANNEL_ID), str(THREAD_ID)}


async def test_a_reminder_in_a_server_channel_is_posted_by_the_personas_webhook(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    await start_lane()
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} /remind 1s standup", mentions=(BOT,))

    await fake_discord.wait_until(lambda: "⏰ standup" in fake_discord.texts_in(CHANNEL_ID))

    [posted] = [m for m in fake_discord.sent_in(CHANNEL_ID) if m.text == "⏰ standup"]
    assert posted.webhook_id is not None
