"""A turn that raises something unforeseen ends with an error event; the web lane keeps serving."""

from __future__ import annotations

import pytest

from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.failures import (
    FAILED_TEXT,
    assert_contained,
    assert_tool_failure_answered,
    install_broken_tool,
    raise_in_provider,
)
from tests.web.conftest import ClientFactory
from tests.web.helpers import WebVisitor


async def test_a_provider_that_raises_type_error_ends_the_turn_not_the_lane(
    make_client: ClientFactory, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client(model_base_url=fake_openai.base_url)
    raise_in_provider(client.runtime)  # type: ignore[attr-defined]
    visitor = await WebVisitor.start(client)

    failed = await visitor.say("first")

    assert FAILED_TEXT in str(failed[-1].data), failed
    assert_contained(client.runtime, "web", "first", caplog)  # type: ignore[attr-defined]
    answered = await visitor.say("second")
    assert answered[-1].name == "done" and answered[-1].data["text"] == "reply to: second"


async def test_a_tool_that_raises_type_error_is_told_to_the_model_and_the_lane_goes_on(
    make_client: ClientFactory, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client(model_base_url=fake_openai.base_url)
    install_broken_tool(client.runtime)  # type: ignore[attr-defined]
    fake_openai.script(ToolCalls([("broken", {})]), "The tool broke; sorry.")
    visitor = await WebVisitor.start(client)

    events = await visitor.say("use the tool")

    assert events[-1].name == "done" and events[-1].data["text"] == "The tool broke; sorry."
    assert "broken failed: TypeError" in str(fake_openai.requests[1].messages[-1])
    again = await visitor.say("again")
    assert again[-1].name == "done" and again[-1].data["text"] == "reply to: again"
    assert_tool_failure_answered(client.runtime, "web", "use the tool", caplog)  # type: ignore[attr-defined]
