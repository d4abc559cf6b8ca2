"""A turn that raises something unforeseen ends with a message; the Discord lane keeps serving."""

from __future__ import annotations

import pytest

from tests.discord.conftest import LaneFactory, spoken
from tests.discord.fake_discord import DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.failures import (
    FAILED_TEXT,
    assert_contained,
    assert_tool_failure_answered,
    install_broken_tool,
    raise_in_provider,
)


async def test_a_provider_that_raises_type_error_ends_the_turn_not_the_lane(
    start_lane: LaneFactory, fake_discord: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    _, runtime = await start_lane()
    raise_in_provider(runtime)

    await fake_discord.post_message(DM_CHANNEL_ID, "first")
    await fake_discord.wait_until(lambda: len(fake_discord.texts_in(DM_CHANNEL_ID)) == 1)
    assert FAILED_TEXT in fake_discord.texts_in(DM_CHANNEL_ID)[0]
    assert_contained(runtime, "discord", "first", caplog)

    await fake_discord.post_message(DM_CHANNEL_ID, "second")
    await fake_discord.wait_until(lambda: len(fake_discord.texts_in(DM_CHANNEL_ID)) == 2)
    assert fake_discord.texts_in(DM_CHANNEL_ID)[1] == spoken("reply to: second")


async def test_a_tool_that_raises_type_error_is_told_to_the_model_and_the_lane_goes_on(
    start_lane: LaneFactory,
    fake_discord: FakeDiscord,
    fake_openai: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, runtime = await start_lane()
    install_broken_tool(runtime)
    fake_openai.script(ToolCalls([("broken", {})]), "The tool broke; sorry.")

    await fake_discord.post_message(DM_CHANNEL_ID, "use the tool")
    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("The tool broke; sorry.")])
    assert "broken failed: TypeError" in str(fake_openai.requests[1].messages[-1])

    await fake_discord.post_message(DM_CHANNEL_ID, "again")
    await fake_discord.wait_until(lambda: len(fake_discord.texts_in(DM_CHANNEL_ID)) == 2)
    # The first turn is over by now: its delivery is closed.
    assert_tool_failure_answered(runtime, "discord", "use the tool", caplog)
