"""A reasoning model in the web API: a `thinking` event while it thinks, its thinking in
`done.reasoning` and in the history only after /reasoning on."""

from __future__ import annotations

import json

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as Scripted
from tests.web.conftest import ClientFactory
from tests.web.helpers import WebVisitor

ANSWER = "It is 4."
THOUGHT = "Two and two make four."


async def test_thinking_streams_as_an_event_and_stays_hidden_by_default(
    make_client: ClientFactory, fake_openai: FakeOpenAI
) -> None:
    client = await make_client(model_base_url=fake_openai.base_url)
    fake_openai.script(Scripted("", chunks=[f"<think>{THOUGHT}</think>", ANSWER]))
    visitor = await WebVisitor.start(client)

    events = await visitor.say("2+2?")

    assert [event.name for event in events] == ["thinking", "delta", "done"]
    assert events[-1].data["text"] == ANSWER and events[-1].data["reasoning"] is None
    page = await visitor.history()
    assert [(m["role"], m["text"]) for m in page["messages"]] == [("user", "2+2?"), ("assistant", ANSWER)]
    assert THOUGHT not in json.dumps(page)


async def test_reasoning_on_puts_the_thinking_in_done_and_in_the_history(
    make_client: ClientFactory, fake_openai: FakeOpenAI
) -> None:
    client = await make_client(model_base_url=fake_openai.base_url)
    visitor = await WebVisitor.start(client)
    await visitor.say("/reasoning on")
    fake_openai.script(Scripted(ANSWER, reasoning=THOUGHT))

    events = await visitor.say("2+2?")

    assert events[-1].data["reasoning"] == THOUGHT
    page = await visitor.history()
    shown = [(m["role"], m["event"], m["text"]) for m in page["messages"]][-3:]
    assert shown == [("user", None, "2+2?"), ("system", "reasoning", THOUGHT), ("assistant", None, ANSWER)]
