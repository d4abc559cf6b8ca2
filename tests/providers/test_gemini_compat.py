"""Gemini's OpenAI-compatible endpoint (…/v1beta/openai/) through the OpenAI-compatible provider.

The stand-in streams what Google's compatibility layer sends for tool calls, as its users
document it: each call whole in one chunk, ids like "function-call-…", parallel calls all
at `index` 0 (or without one), `extra_content.google.thought_signature` on a call, and
`finish_reason` "stop" even when the answer is calls.
"""

from __future__ import annotations

import json
from typing import Any

from bot.providers.base import ChatRequest, TextDelta, ToolCall
from tests.fakes.openai_server import FakeOpenAI, Writes
from tests.providers.conftest import ProviderFactory

WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def gemini_chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "gemini-stream",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gemini-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def whole_call(number: int, city: str, *, index: int | None = 0) -> dict[str, Any]:
    call: dict[str, Any] = {
        "id": f"function-call-{number}",
        "type": "function",
        "function": {"name": "weather", "arguments": json.dumps({"city": city})},
        "extra_content": {"google": {"thought_signature": f"sig-{number}"}},
    }
    if index is not None:
        call["index"] = index
    return call


def sse(data: dict[str, Any] | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"


def gemini_stream(*calls: dict[str, Any]) -> Writes:
    events = [sse(gemini_chunk({"role": "assistant", "content": "Checking. "}))]
    events += [sse(gemini_chunk({"tool_calls": [call]})) for call in calls]
    return Writes((*events, sse(gemini_chunk({}, "stop")), sse("[DONE]")))


async def test_parallel_calls_all_at_index_zero_stay_apart(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(
        gemini_stream(whole_call(1, "Oslo"), whole_call(2, "Bergen"), whole_call(3, "Tromsø", index=None))
    )
    request = ChatRequest(
        messages=[{"role": "user", "content": "weather in three cities?"}],
        model="gemini-test",
        tools=(WEATHER,),
    )

    events = [event async for event in make_provider().stream(request)]

    assert "".join(event.text for event in events if isinstance(event, TextDelta)) == "Checking. "
    assert [event for event in events if isinstance(event, ToolCall)] == [
        ToolCall("function-call-1", "weather", '{"city": "Oslo"}'),
        ToolCall("function-call-2", "weather", '{"city": "Bergen"}'),
        ToolCall("function-call-3", "weather", '{"city": "Troms\\u00f8"}'),
    ]
