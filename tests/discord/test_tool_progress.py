"""While a tool runs, the Discord draft shows one progress line per call, then the answer."""

from __future__ import annotations

from tests.discord.conftest import LaneFactory, spoken
from tests.discord.fake_discord import BOT, CHANNEL_ID, DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.tools import RAW_RESULT, HeldTool

ANSWER = "Your dentist is on Tuesday."


async def test_dm_draft_shows_a_line_per_call_then_is_edited_into_the_answer(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    _, runtime = await start_lane()
    held = HeldTool().install(runtime)
    fake_openai.script(
        ToolCalls([("lookup", {"query": "dentist"}), ("lookup", {"query": "gym"})], text="Let me check. "),
        ANSWER,
    )
    await fake_discord.post_message(DM_CHANNEL_ID, "when is my dentist?")

    progress = spoken("🔧 lookup: dentist\n🔧 lookup: gym ▌")
    await fake_discord.wait_until(lambda: fake_discord.texts_in(DM_CHANNEL_ID) == [progress])
    held.release.set()

    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken(ANSWER)])
    (reply,) = fake_discord.sent_in(DM_CHANNEL_ID)
    assert progress in reply.versions
    assert all(RAW_RESULT not in version and "Let me check" not in version for version in reply.versions)


async def test_server_channel_progress_is_posted_as_the_persona(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    _, runtime = await start_lane()
    held = HeldTool().install(runtime)
    # No text before the call: the first thing the draft shows is the progress line.
    fake_openai.script(ToolCalls([("lookup", {"query": "dentist"})]), ANSWER)
    await fake_discord.post_message(CHANNEL_ID, f"<@{BOT['id']}> dentist?", mentions=(BOT,))

    await fake_discord.wait_until(lambda: fake_discord.texts_in(CHANNEL_ID) == ["🔧 lookup: dentist ▌"])
    (draft,) = fake_discord.sent_in(CHANNEL_ID)
    assert draft.username == "Ada"
    held.release.set()

    await fake_discord.wait_for_texts(CHANNEL_ID, [ANSWER])
    (final,) = fake_discord.sent_in(CHANNEL_ID)
    assert final.id == draft.id and final.username == "Ada"
