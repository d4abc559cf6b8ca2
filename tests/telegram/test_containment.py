"""A turn that raises something unforeseen ends with a message; the Telegram lane keeps serving."""

from __future__ import annotations

import pytest

from bot.runtime import Runtime
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.failures import (
    FAILED_TEXT,
    assert_contained,
    assert_tool_failure_answered,
    install_broken_tool,
    raise_in_provider,
)
from tests.telegram.bot_api_server import FakeBotAPI, private_text
from tests.telegram.conftest import LaneFactory


async def test_a_provider_that_raises_type_error_ends_the_turn_not_the_lane(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI, caplog: pytest.LogCaptureFixture
) -> None:
    await start_lane()
    raise_in_provider(runtime)
    bot_api.push(private_text(901, "first", message_id=5901))

    await bot_api.wait_for(lambda: bot_api.sent_texts(901))
    assert bot_api.sent_texts(901) == [FAILED_TEXT]
    assert_contained(runtime, "telegram", "first", caplog)

    bot_api.push(private_text(901, "second", message_id=5902))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(901)) == 2)
    assert bot_api.sent_texts(901)[1] == "Ada\nreply to: second"


async def test_a_tool_that_raises_type_error_is_told_to_the_model_and_the_lane_goes_on(
    start_lane: LaneFactory,
    runtime: Runtime,
    bot_api: FakeBotAPI,
    fake_openai: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    install_broken_tool(runtime)
    await start_lane()
    fake_openai.script(ToolCalls([("broken", {})]), "The tool broke; sorry.")
    bot_api.push(private_text(902, "use the tool", message_id=5903))

    await bot_api.wait_for(lambda: bot_api.sent_texts(902))
    assert bot_api.sent_texts(902) == ["Ada\nThe tool broke; sorry."]
    assert "broken failed: TypeError" in str(fake_openai.requests[1].messages[-1])

    bot_api.push(private_text(902, "again", message_id=5904))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(902)) == 2)
    assert bot_api.sent_texts(902)[1] == "Ada\nreply to: again"
    # The first turn is over by now: its delivery is closed.
    assert_tool_failure_answered(runtime, "telegram", "use the tool", caplog)
