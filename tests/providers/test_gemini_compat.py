"""Gemini's OpenAI-compatible endpoint (…/v1beta/openai/) through the OpenAI-compatible provider.

The stand-in streams what Google's compatibility layer sends for tool calls, as its users
document it: each call whole in one chunk, ids like "function-call-…", parallel calls all
at `index` 0 (or without one), `extra_content.google.thought_signature` on a call, and
`finish_reason` "stop" even when the answer is calls. Like Gemini 3 it refuses (400) a
request in which a call it signed comes back without its signature.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from bot.providers.base import ChatRequest, Finish, ProviderBlocks, TextDelta, ToolCall
from bot.runtime import Runtime
from bot.tools.base import FunctionTool, ToolContext
from bot.tools.registry import StaticTools
from tests.fakes.openai_server import FakeOpenAI, HttpError, Scripted, ToolCalls, Writes
from tests.providers.conftest import ProviderFactory
from tests.support.runtime import RuntimeFactory, inbound
from transcript import PROVIDER_BLOCKS_KEY

GEMINI_3 = "gemini-3-pro-preview"

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


def signature(number: int) -> dict[str, Any]:
    """The `extra_content` Gemini 3 signs a call with (its signature is opaque base64)."""
    return {"google": {"thought_signature": base64.b64encode(f"thought {number}".encode()).decode()}}


def whole_call(number: int, city: str, *, index: int | None = 0, signed: bool = True) -> dict[str, Any]:
    call: dict[str, Any] = {
        "id": f"function-call-{number}",
        "type": "function",
        "function": {"name": "weather", "arguments": json.dumps({"city": city})},
    }
    if signed:
        call["extra_content"] = signature(number)
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


async def test_each_calls_extra_content_comes_as_the_answers_provider_blocks(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    # Gemini signs the first of parallel calls only; another server's object is carried alike.
    other = {"vendor": {"trace": [1, 2], "note": "kept as sent"}}
    fake_openai.script(
        gemini_stream(
            whole_call(1, "Oslo"),
            whole_call(2, "Bergen", signed=False),
            {**whole_call(3, "Bodø"), "extra_content": other},
        )
    )
    request = ChatRequest(
        messages=[{"role": "user", "content": "weather?"}], model=GEMINI_3, tools=(WEATHER,)
    )

    events = [event async for event in make_provider().stream(request)]

    assert [type(event) for event in events[-5:]] == [ToolCall, ToolCall, ToolCall, ProviderBlocks, Finish]
    assert events[-2] == ProviderBlocks(
        "openai",
        [
            {"tool_call_id": "function-call-1", "model": GEMINI_3, "extra_content": signature(1)},
            {"tool_call_id": "function-call-3", "model": GEMINI_3, "extra_content": other},
        ],
    )


async def test_a_whole_completions_calls_keep_their_extra_content(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.ignores_stream = True
    fake_openai.script(
        ToolCalls([("weather", {"city": "Oslo"})], extra_content=(signature(1),)), "plain answer"
    )
    provider = make_provider()
    request = ChatRequest(
        messages=[{"role": "user", "content": "weather?"}], model=GEMINI_3, tools=(WEATHER,)
    )

    called = [event async for event in provider.stream(request)]
    answered = [event async for event in provider.stream(request)]

    assert (
        ProviderBlocks(
            "openai", [{"tool_call_id": "call_0_weather", "model": GEMINI_3, "extra_content": signature(1)}]
        )
        in called
    )
    assert not any(isinstance(event, ProviderBlocks) for event in answered)


def round_messages(blocks: object) -> list[dict[str, Any]]:
    """A tool round as the transcript builds it, the call message carrying `blocks`."""
    calls = [
        {"type": "function", "id": f"function-call-{n}", "function": {"name": "weather", "arguments": "{}"}}
        for n in (1, 2)
    ]
    call: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
    if blocks is not None:
        call[PROVIDER_BLOCKS_KEY] = blocks
    results = [{"role": "tool", "tool_call_id": f"function-call-{n}", "content": "rain"} for n in (1, 2)]
    return [{"role": "user", "content": "weather?"}, call, *results]


async def test_extra_content_goes_back_on_its_call_to_the_model_that_sent_it_only(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    signed = {
        "provider": "openai",
        "blocks": [{"tool_call_id": "function-call-1", "model": GEMINI_3, "extra_content": signature(1)}],
    }
    thinking = {"provider": "anthropic", "blocks": [{"type": "thinking", "thinking": "", "signature": "s"}]}
    provider = make_provider()

    for model, blocks in [
        (GEMINI_3, signed),
        ("other-model", signed),
        ("other-model", thinking),
        ("other-model", None),
    ]:
        await provider.complete(ChatRequest(messages=round_messages(blocks), model=model))

    to_gemini, *to_other = fake_openai.requests
    calls = to_gemini.json["messages"][1]["tool_calls"]
    assert [call.get("extra_content") for call in calls] == [signature(1), None]
    assert list(calls[0]) == ["type", "id", "function", "extra_content"]
    # Another model never sees them: the body is the one of a round without blocks, byte for byte.
    assert to_other[0].body == to_other[1].body == to_other[2].body
    assert b"extra_content" not in to_other[2].body and PROVIDER_BLOCKS_KEY.encode() not in to_other[2].body


class City(BaseModel):
    city: str


async def _weather(context: ToolContext, arguments: City) -> object:
    return {"city": arguments.city, "sky": "rain"}


class GeminiThree:
    """Answers turns (requests with tools) as Gemini 3 does, from `answers` in order: a list
    of cities is one round of parallel calls for their weather (the first call signed), a
    str the reply's text. A request in which a call it made comes back with other
    `extra_content` than it issued (none included) is refused with Gemini's 400. Gemini
    checks the calls of the current turn only; this checks all, so later turns prove the replay too.
    """

    def __init__(self, *answers: list[str] | str) -> None:
        self._answers: deque[list[str] | str] = deque(answers)
        self._numbers = itertools.count(1)
        # The `extra_content` each call went out with (None: unsigned), by call id.
        self.issued: dict[str, dict[str, Any] | None] = {}
        # The calls that came back without what they were signed with, as they were refused.
        self.refused: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str | Scripted:
        if not body.get("tools"):
            return "noted"
        for call_id, extra_content in returned_calls(body).items():
            if call_id in self.issued and extra_content != self.issued[call_id]:
                self.refused.append(call_id)
                message = (
                    "Function call is missing a thought_signature in functionCall parts "
                    f"(function call `weather`, id {call_id})."
                )
                return HttpError(
                    400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
                )
        answer = self._answers.popleft()
        if isinstance(answer, str):
            return answer
        calls = [
            whole_call(next(self._numbers), city, signed=position == 0)
            for position, city in enumerate(answer)
        ]
        self.issued.update({call["id"]: call.get("extra_content") for call in calls})
        return gemini_stream(*calls)


def returned_calls(body: dict[str, Any]) -> dict[str, object]:
    """The `extra_content` (None: none) of every call the request sends back, by call id."""
    return {
        call["id"]: call.get("extra_content")
        for message in body["messages"]
        if message["role"] == "assistant"
        for call in message.get("tool_calls", [])
    }


def gemini_runtime(runtimes: RuntimeFactory, tmp_path: Path, server: FakeOpenAI) -> Runtime:
    runtime = runtimes(tmp_path, model_base_url=server.base_url, model_name=GEMINI_3, memory_enabled=False)
    runtime.tools.add_source(
        StaticTools([FunctionTool("weather", "The weather in a city.", City, _weather, read_only=True)])
    )
    return runtime


@pytest.mark.parametrize("lane", ["web", "telegram"])
async def test_signatures_go_back_in_the_tool_round_in_later_turns_and_after_a_restart(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI, lane: str
) -> None:
    gemini = GeminiThree(
        ["Oslo", "Bergen"], ["Tromsø"], "Rain in all three.", "Take an umbrella.", "Still rain."
    )
    fake_openai.default = gemini
    first = gemini_runtime(runtimes, tmp_path, fake_openai)

    asked = await first.engine.respond(inbound("weather in Oslo, Bergen and Tromsø?", lane=lane))
    later = await first.engine.respond(inbound("what should I take?", lane=lane))
    await first.aclose()
    second = gemini_runtime(runtimes, tmp_path, fake_openai)
    restarted = await second.engine.respond(inbound("and tomorrow?", lane=lane))

    assert gemini.refused == []
    assert (asked.text, later.text, restarted.text) == (
        "Rain in all three.",
        "Take an umbrella.",
        "Still rain.",
    )
    first_round = {"function-call-1": signature(1), "function-call-2": None}
    assert gemini.issued == {**first_round, "function-call-3": signature(3)}
    turns = [request.json for request in fake_openai.requests if request.json.get("tools")]
    # Asked, the second round, the answer, the next turn, the turn after the restart.
    assert [returned_calls(body) for body in turns] == [{}, first_round, *[gemini.issued] * 3]
    stored = second.stores.messages.rows_after(asked.session_id or "", 0)
    assert [row.provider_blocks for row in stored if row.tool_calls] == [
        {
            "provider": "openai",
            "blocks": [
                {"tool_call_id": f"function-call-{n}", "model": GEMINI_3, "extra_content": signature(n)}
            ],
        }
        for n in (1, 3)
    ]
