"""A turn that calls tools over the web API: `tool` events as documented, and a history without results."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.tools import RAW_RESULT, HeldTool
from tests.web.conftest import ClientFactory, Event
from tests.web.helpers import WebVisitor

ANSWER = "Your dentist is on Tuesday."


def documented(document: dict[str, Any], name: str) -> dict[str, Any]:
    schema: dict[str, Any] = document["components"]["schemas"][name]
    return schema


def assert_documented(event: Event, schema: dict[str, Any]) -> None:
    assert set(event.data) == set(schema["properties"]), event
    assert set(schema["required"]) <= set(event.data)
    assert event.data["status"] in schema["properties"]["status"]["enum"]


async def client_with_lookup(
    make_client: ClientFactory, fake_openai: FakeOpenAI, **settings: str
) -> httpx.AsyncClient:
    """The web app on a runtime with a `lookup` tool that answers at once."""
    client = await make_client(model_base_url=fake_openai.base_url, **settings)
    HeldTool().install(client.runtime).release.set()  # type: ignore[attr-defined]
    return client


async def test_tool_calls_stream_as_documented_tool_events_between_the_text(
    make_client: ClientFactory, fake_openai: FakeOpenAI
) -> None:
    client = await client_with_lookup(make_client, fake_openai)
    fake_openai.script(
        ToolCalls(
            [("lookup", {"query": "dentist"}), ("lookup", {"query": "gym"})],
            text="Let me check. ",
            piece_chars=3,
        ),
        ANSWER,
    )
    visitor = await WebVisitor.start(client)

    events = await visitor.say("when is my dentist?")

    names = [event.name for event in events]
    assert names[0] == "delta" and events[0].data == {"text": "Let me check. "}
    tools = [event for event in events if event.name == "tool"]
    assert [(e.data["status"], e.data["summary"]) for e in tools[:2]] == [
        ("started", "dentist"),
        ("started", "gym"),
    ]
    assert sorted(e.data["line"] for e in tools[2:]) == ["🔧 lookup: dentist", "🔧 lookup: gym"]
    # The same words without the mark, for a client that draws its own (the widget's icons).
    assert sorted(e.data["label"] for e in tools[2:]) == ["lookup: dentist", "lookup: gym"]
    assert {e.data["status"] for e in tools[2:]} == {"done"}
    assert names[1:5] == ["tool"] * 4 and names[-1] == "done"
    after = "".join(event.data["text"] for event in events[5:-1])
    assert after == ANSWER and events[-1].data["text"] == ANSWER
    assert RAW_RESULT not in json.dumps([event.data for event in events])
    schema = documented((await client.get("/openapi.json")).json(), "ToolEvent")
    for event in tools:
        assert_documented(event, schema)


async def test_the_history_shows_progress_lines_never_the_tools_raw_output(
    make_client: ClientFactory, fake_openai: FakeOpenAI
) -> None:
    client = await client_with_lookup(make_client, fake_openai)
    fake_openai.script(ToolCalls([("lookup", {"query": "dentist"})], text="Let me check. "), ANSWER)
    visitor = await WebVisitor.start(client)
    await visitor.say("when is my dentist?")

    page = await visitor.history()

    shown = [(m["role"], m["event"], m["text"]) for m in page["messages"]]
    assert shown == [
        ("user", None, "when is my dentist?"),
        ("system", "tool", "🔧 lookup: dentist"),
        ("assistant", None, ANSWER),
    ]
    [tool_event] = [m for m in page["messages"] if m["event"] == "tool"]
    assert [(t["name"], t["status"], t["label"]) for t in tool_event["tools"]] == [
        ("lookup", "done", "lookup: dentist")
    ]
    assert [t["call_id"] for t in tool_event["tools"]] != [""]
    assert RAW_RESULT not in json.dumps(page)


async def test_a_failing_call_is_an_error_event_and_the_model_recovers(
    make_client: ClientFactory, fake_openai: FakeOpenAI
) -> None:
    client = await client_with_lookup(make_client, fake_openai)
    fake_openai.script(
        ToolCalls([("no_such_tool", {"query": "dentist"})]),
        ToolCalls([("lookup", {"query": "dentist"})]),
        ANSWER,
    )
    visitor = await WebVisitor.start(client)

    events = await visitor.say("when is my dentist?")

    steps = [(e.data["status"], e.data["line"], e.data["label"]) for e in events if e.name == "tool"]
    assert steps == [
        ("started", "🔧 no_such_tool: dentist", "no_such_tool: dentist"),
        ("error", "⚠️ no_such_tool: dentist", "no_such_tool: dentist"),
        ("started", "🔧 lookup: dentist", "lookup: dentist"),
        ("done", "🔧 lookup: dentist", "lookup: dentist"),
    ]
    assert events[-1].name == "done" and events[-1].data["text"] == ANSWER


async def test_past_max_steps_the_reply_says_it_stopped_using_tools(
    make_client: ClientFactory, fake_openai: FakeOpenAI
) -> None:
    client = await client_with_lookup(make_client, fake_openai, tools_max_steps="1")
    fake_openai.script(ToolCalls([("lookup", {"query": "dentist"})]), ANSWER)
    visitor = await WebVisitor.start(client)

    events = await visitor.say("when is my dentist?")

    final = events[-1]
    assert final.name == "done"
    assert (
        final.data["text"].startswith(ANSWER) and "[Stopped using tools after 1 steps.]" in final.data["text"]
    )
    turn_requests = [r.json for r in fake_openai.requests if r.json and "tools" in r.json]
    assert [body.get("tool_choice") for body in turn_requests] == [None, "none"]


async def test_stop_while_a_tool_runs_ends_the_reply_and_stores_the_call_as_stopped(
    make_client: ClientFactory, fake_openai: FakeOpenAI
) -> None:
    client = await make_client(model_base_url=fake_openai.base_url)
    runtime = client.runtime  # type: ignore[attr-defined]
    held = HeldTool().install(runtime)
    fake_openai.script(ToolCalls([("lookup", {"query": "dentist"})], text="Let me check. "))
    visitor = await WebVisitor.start(client)
    turn = asyncio.create_task(visitor.say("when is my dentist?"))
    async with asyncio.timeout(60):
        while not held.asked:
            await asyncio.sleep(0.02)

    stopped = await visitor.client.post(f"/api/sessions/{visitor.session_id}/stop", headers=visitor.headers)

    assert stopped.json() == {"stopped": True}
    events = await asyncio.wait_for(turn, 60)
    assert events[-1].name == "done" and events[-1].data["status"] == "stopped"
    rows = runtime.stores.messages.messages(visitor.session_id)
    [result] = [row for row in rows if row.kind == "tool_result"]
    assert result.status == "failed" and "the turn was stopped" in result.content
    assert not held.release.is_set()  # cancelled, never finished
