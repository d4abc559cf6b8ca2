"""How a reply reaches Discord: no needless edits, a deleted draft loses nothing."""

from __future__ import annotations

from tests.discord.conftest import LaneFactory, spoken
from tests.discord.fake_discord import BOT, CHANNEL_ID, DM_CHANNEL_ID, THREAD_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as ModelReply

SLOW_TEXT = " ".join(f"word{n}" for n in range(60))
SLOW = ModelReply(SLOW_TEXT, delay=0.1)


def stop_buttons(components: list[dict[str, object]]) -> list[str]:
    return [
        str(button["custom_id"])
        for row in components
        for button in row["components"]  # type: ignore[attr-defined]
        if str(button.get("custom_id", "")).startswith("chorus-stop:")  # type: ignore[attr-defined]
    ]


async def test_a_short_reply_is_sent_once_without_edits(
    start_lane: LaneFactory, fake_discord: FakeDiscord
) -> None:
    await start_lane()
    await fake_discord.post_message(DM_CHANNEL_ID, "quick one")

    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: quick one")])
    (reply,) = fake_discord.sent_in(DM_CHANNEL_ID)
    assert reply.versions == [spoken("reply to: quick one")]
    assert not fake_discord.calls_to("PATCH", f"/messages/{reply.id}")


async def test_a_deleted_draft_is_replaced_and_the_reply_still_arrives(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(SLOW)
    await start_lane()
    await fake_discord.post_message(DM_CHANNEL_ID, "tell me a lot")
    await fake_discord.wait_until(lambda: "▌" in "".join(fake_discord.texts_in(DM_CHANNEL_ID)))
    (draft,) = fake_discord.sent_in(DM_CHANNEL_ID)

    await fake_discord.delete_message(draft.id)

    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken(SLOW_TEXT)])
    (final,) = fake_discord.sent_in(DM_CHANNEL_ID)
    assert final.id != draft.id
    refused = [c for c in fake_discord.calls_to("PATCH", f"/messages/{draft.id}") if c.status == 404]
    # Answered 404 with code 10008 (Unknown Message), which the lane reads as "draft gone".
    assert refused


async def test_a_deleted_persona_draft_in_a_server_channel_is_replaced_too(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(SLOW)
    await start_lane()
    await fake_discord.post_message(CHANNEL_ID, f"<@{BOT['id']}> tell me a lot", mentions=(BOT,))
    await fake_discord.wait_until(lambda: "▌" in "".join(fake_discord.texts_in(CHANNEL_ID)))
    (draft,) = fake_discord.sent_in(CHANNEL_ID)

    await fake_discord.delete_message(draft.id)

    await fake_discord.wait_for_texts(CHANNEL_ID, [SLOW_TEXT])
    (final,) = fake_discord.sent_in(CHANNEL_ID)
    assert final.id != draft.id and final.username == "Ada"


async def test_the_streaming_draft_carries_a_stop_button_that_the_final_text_removes(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(SLOW)
    await start_lane()
    await fake_discord.post_message(DM_CHANNEL_ID, "tell me a lot")
    await fake_discord.wait_until(lambda: "▌" in "".join(fake_discord.texts_in(DM_CHANNEL_ID)))
    (draft,) = fake_discord.sent_in(DM_CHANNEL_ID)
    assert len(stop_buttons(draft.components)) == 1

    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken(SLOW_TEXT)])
    assert draft.components == []


async def test_a_persona_reply_streams_into_one_message_in_a_thread(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(SLOW)
    await start_lane()
    await fake_discord.post_message(THREAD_ID, f"<@{BOT['id']}> tell me a lot", mentions=(BOT,))

    await fake_discord.wait_for_texts(THREAD_ID, [SLOW_TEXT])
    (reply,) = fake_discord.sent_in(THREAD_ID)
    assert reply.username == "Ada" and len(reply.versions) >= 3 and reply.components == []
    assert all(
        c.query.get("thread_id") == str(THREAD_ID) for c in fake_discord.calls_to("PATCH", str(reply.id))
    )
