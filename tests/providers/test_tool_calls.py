"""Tool calls as the Chat Completions API streams them, through the real provider over HTTP."""

from __future__ import annotations

import json
import logging

import pytest

from bot.errors import ProviderRejected, StreamInterrupted
from bot.providers.base import ChatRequest, Finish, ModelEvent, TextDelta, ToolCall, Usage
from bot.providers.openai import OpenAICompatibleProvider
from bot.providers.tool_calls import ToolCallAssembler
from tests.fakes.openai_server import FakeOpenAI, HttpError, ToolCalls
from tests.providers.conftest import ProviderFactory

RECALL = {
    "type": "function",
    "function": {
        "name": "recall",
        "description": "Search memory.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}
CONTEXT = {
    "type": "function",
    "function": {"name": "context_inspect", "description": "Context use.", "parameters": {"type": "object"}},
}


def chat(*tools: dict[str, object], model: str = "test-model") -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "user", "content": "what did I say about the dentist?"}],
        model=model,
        tools=tuple(tools),
    )


async def events(provider: OpenAICompatibleProvider, request: ChatRequest) -> list[ModelEvent]:
    return [event async for event in provider.stream(request)]


async def test_fragments_by_index_become_whole_calls_after_the_text(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(
        ToolCalls(
            [("recall", {"query": "dentist appointment", "k": 3}), ("context_inspect", {})],
            text="Let me look. ",
            piece_chars=3,
            interleave=True,
        )
    )

    answer = await events(make_provider(), chat(RECALL, CONTEXT))

    text = "".join(event.text for event in answer if isinstance(event, TextDelta))
    calls = [event for event in answer if isinstance(event, ToolCall)]
    assert text == "Let me look. "
    assert calls == [
        ToolCall("call_0_recall", "recall", json.dumps({"query": "dentist appointment", "k": 3})),
        ToolCall("call_1_context_inspect", "context_inspect", "{}"),
    ]
    assert answer[-1] == Finish("tool_calls")
    # Text, then the calls, then what the call cost, then the finish: nothing after the finish.
    assert [type(event) for event in answer[-4:]] == [ToolCall, ToolCall, Usage, Finish]


async def test_interleaved_and_sequential_parallel_calls_give_the_same_calls(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    arguments = [
        ("recall", {"query": "a long query about the trip to Lisbon"}),
        ("recall", {"query": "Porto"}),
    ]
    fake_openai.script(ToolCalls(arguments, interleave=True), ToolCalls(arguments, interleave=False))
    provider = make_provider()

    interleaved = [event for event in await events(provider, chat(RECALL)) if isinstance(event, ToolCall)]
    sequential = [event for event in await events(provider, chat(RECALL)) if isinstance(event, ToolCall)]

    assert interleaved == sequential
    assert [json.loads(call.arguments)["query"] for call in interleaved] == [
        "a long query about the trip to Lisbon",
        "Porto",
    ]


async def test_a_whole_completion_with_tool_calls_is_read_too(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.ignores_stream = True
    fake_openai.script(ToolCalls([("recall", {"query": "dentist"})]), "plain answer")
    provider = make_provider()

    first = await events(provider, chat(RECALL))
    second = await events(provider, chat(RECALL))

    assert first == [ToolCall("call_0_recall", "recall", '{"query": "dentist"}'), Finish("tool_calls")]
    assert second == [TextDelta("plain answer"), Finish("stop")]


async def test_tools_are_sent_sorted_by_name(fake_openai: FakeOpenAI, make_provider: ProviderFactory) -> None:
    provider = make_provider()

    await provider.complete(chat(RECALL, CONTEXT))
    await provider.complete(chat(CONTEXT, RECALL))

    first, second = fake_openai.requests
    assert first.body == second.body
    assert [tool["function"]["name"] for tool in first.json["tools"]] == ["context_inspect", "recall"]


async def test_no_retry_once_a_tool_call_fragment_arrived(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(ToolCalls([("recall", {"query": "dentist"})], after_pieces=1), "not used")

    with pytest.raises(StreamInterrupted):
        await events(make_provider(), chat(RECALL))

    assert len(fake_openai.requests) == 1


async def test_a_server_that_refuses_tools_is_asked_without_them_from_then_on(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory, caplog: pytest.LogCaptureFixture
) -> None:
    refusal = {"error": {"message": "tools is not supported for this model", "type": "invalid_request_error"}}
    fake_openai.script(HttpError(400, refusal), "first answer", "second answer")
    provider = make_provider()

    with caplog.at_level(logging.WARNING, logger="bot.providers.openai"):
        first = await provider.complete(chat(RECALL))
        second = await provider.complete(chat(RECALL))

    assert (first, second) == ("first answer", "second answer")
    assert ["tools" in request.json for request in fake_openai.requests] == [True, False, False]
    assert not provider.accepts_tools("test-model")
    assert provider.accepts_tools("another-model")
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1 and "test-model" in warnings[0].getMessage()


async def test_a_400_about_something_else_is_not_taken_for_a_tools_refusal(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(HttpError(400, {"error": {"message": "Invalid value for 'temperature'"}}))
    provider = make_provider()

    with pytest.raises(Exception, match="temperature"):
        await provider.complete(chat(RECALL))

    assert provider.accepts_tools("test-model")
    assert len(fake_openai.requests) == 1


async def test_a_missing_thought_signature_is_not_taken_for_a_tools_refusal(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    # Gemini 3's 400 names a "function call", but what it refuses is one call's missing signature.
    message = "Function call is missing a thought_signature in functionCall parts."
    fake_openai.script(
        HttpError(400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})
    )
    provider = make_provider()

    with pytest.raises(ProviderRejected, match="thought_signature"):
        await provider.complete(chat(RECALL))

    assert provider.accepts_tools("test-model")
    assert len(fake_openai.requests) == 1


def test_fragments_without_index_repeated_ids_and_object_arguments() -> None:
    """What servers imitating the API send at the edges still joins into the same calls."""
    assembler = ToolCallAssembler()
    assembler.add([{"id": "a", "function": {"name": "recall", "arguments": '{"query":'}}])
    assembler.add([{"id": "a", "function": {"name": "recall", "arguments": ' "x"}'}}])
    assembler.add([{"id": "b", "function": {"name": "remember", "arguments": {"text": "hi"}}}])
    assembler.add(["not a fragment", {"function": "nor this"}])

    assert assembler.calls() == [
        ToolCall("a", "recall", '{"query": "x"}'),
        ToolCall("b", "remember", '{"text":"hi"}'),
    ]
