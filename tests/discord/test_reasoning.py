"""A reasoning model on Discord: "thinking…" in the draft, the thinking as a spoiler after /reasoning on."""

from __future__ import annotations

import asyncio

from tests.discord.conftest import LaneFactory, spoken
from tests.discord.fake_discord import DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, Writes

ANSWER = "It is 4."
THOUGHT = "Two and two\nmake four."


def thinking_then_answer(fake_openai: FakeOpenAI, gate: asyncio.Event) -> Writes:
    return Writes(
        (
            fake_openai.reasoning_event(THOUGHT, "reasoning"),
            gate,
            fake_openai.event(ANSWER),
            fake_openai.finish(),
        )
    )


async def test_the_draft_says_thinking_and_the_thinking_stays_hidden_by_default(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    gate = asyncio.Event()
    fake_openai.script(thinking_then_answer(fake_openai, gate))
    await fake_discord.post_message(DM_CHANNEL_ID, "2+2?")

    await fake_discord.wait_until(lambda: fake_discord.texts_in(DM_CHANNEL_ID) == [spoken("💭 thinking… ▌")])
    gate.set()

    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken(ANSWER)])


async def test_reasoning_on_shows_the_thinking_as_a_spoiler_above_the_answer(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    await fake_discord.post_message(DM_CHANNEL_ID, "/reasoning on")
    await fake_discord.wait_until(
        lambda: any("Reasoning is on" in t for t in fake_discord.texts_in(DM_CHANNEL_ID))
    )
    gate = asyncio.Event()
    gate.set()
    fake_openai.script(thinking_then_answer(fake_openai, gate))
    await fake_discord.post_message(DM_CHANNEL_ID, "2+2?")

    folded = spoken("💭 ||Two and two make four.||\n\n" + ANSWER)
    await fake_discord.wait_until(lambda: fake_discord.texts_in(DM_CHANNEL_ID)[-1:] == [folded])
