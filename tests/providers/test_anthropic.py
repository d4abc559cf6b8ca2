from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.errors import ContextOverflowError, ProviderRejected, ProviderUnavailable, StreamInterrupted
from bot.providers.anthropic import AnthropicProvider
from bot.providers.anthropic_messages import request_params, sendable_params
from bot.providers.base import (
    ChatRequest,
    Finish,
    ModelEvent,
    ProviderBlocks,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    Usage,
)
from tests.fakes.anthropic_server import (
    Answer,
    ApiError,
    FakeAnthropic,
    overloaded,
    prompt_too_long,
    rate_limited,
)
from transcript import PROVIDER_BLOCKS_KEY

Factory = Callable[..., AnthropicProvider]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
CLOCK_TOOL = {"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}
# A redacted_thinking block's `data`: thinking the API encrypted, opaque to the client.
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"


@pytest.fixture
async def make_anthropic(fake_anthropic: FakeAnthropic) -> AsyncIterator[Factory]:
    providers: list[AnthropicProvider] = []

    def make(**options: Any) -> AnthropicProvider:
        settings: dict[str, Any] = {"base_url": fake_anthropic.base_url, "backoff_base": 0.001, **options}
        provider = AnthropicProvider("test-key", **settings)
        providers.append(provider)
        return provider

    yield make
    for provider in providers:
        await provider.aclose()


def chat(*messages: dict[str, Any], **options: Any) -> ChatRequest:
    return ChatRequest(messages=list(messages), model="claude-test", **options)


async def events_of(provider: AnthropicProvider, request: ChatRequest) -> list[ModelEvent]:
    return [event async for event in provider.stream(request)]


def tool_round(events: list[ModelEvent], blocks: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The assistant message that made `events`' calls, with `blocks` as its own, and the call's result."""
    (call,) = [event for event in events if isinstance(event, ToolCall)]
    assistant = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "id": call.id, "function": {"name": call.name, "arguments": call.arguments}}
        ],
        PROVIDER_BLOCKS_KEY: {"provider": "anthropic", "blocks": blocks},
    }
    return assistant, {"role": "tool", "tool_call_id": call.id, "content": "rain"}


async def test_text_streams_in_pieces_and_ends_with_usage_and_stop(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    fake_anthropic.script(Answer(text="Hello there, how are you today?"))

    events = await events_of(
        make_anthropic(), chat({"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"})
    )

    deltas = [event.text for event in events if isinstance(event, TextDelta)]
    assert len(deltas) > 1 and "".join(deltas) == "Hello there, how are you today?"
    assert isinstance(events[-2], Usage) and events[-1] == Finish("stop")
    body = fake_anthropic.requests[0].json
    assert body["system"][0]["text"] == "Be kind."
    assert body["messages"][0]["content"][0]["text"] == "hi"
    headers = fake_anthropic.requests[0].headers
    assert "test-key" in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))


async def test_history_becomes_alternating_blocks_with_tool_use_and_results(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    image = "data:image/png;base64,iVBORw0KGgo="
    request = chat(
        {"role": "system", "content": "Persona."},
        {"role": "assistant", "content": "Hi, I am here."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": image}}],
        },
        {"role": "user", "content": "and tell me the weather"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "type": "function",
                    "id": "toolu_1",
                    "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "rain"},
        tools=(WEATHER_TOOL,),
    )

    await events_of(make_anthropic(), request)

    messages = fake_anthropic.requests[0].json["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[2]["content"][1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": "iVBORw0KGgo=",
    }
    assert messages[2]["content"][2]["text"] == "and tell me the weather"
    # The message before the newest user message closes the cached prefix.
    assert messages[3]["content"] == [
        {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "weather",
            "input": {"city": "Oslo"},
            "cache_control": {"type": "ephemeral"},
        }
    ]
    assert messages[4]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"}


async def test_tool_calls_are_assembled_from_json_deltas(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    fake_anthropic.script(
        Answer(text="Let me check.", tool_calls=[("weather", {"city": "Oslo"}), ("clock", {})])
    )

    events = await events_of(
        make_anthropic(), chat({"role": "user", "content": "weather?"}, tools=(WEATHER_TOOL, CLOCK_TOOL))
    )

    calls = [event for event in events if isinstance(event, ToolCall)]
    assert [(call.name, call.arguments) for call in calls] == [
        ("weather", '{"city": "Oslo"}'),
        ("clock", "{}"),
    ]
    assert events[-1] == Finish("tool_calls")


async def test_a_tool_round_with_thinking_replays_the_signed_thinking_before_tool_use(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    provider = make_anthropic()
    fake_anthropic.script(
        Answer(
            thinking="The user wants Oslo's weather; call the tool.",
            tool_calls=[("weather", {"city": "Oslo"})],
        ),
        Answer(text="It rains in Oslo."),
    )
    question = {"role": "user", "content": "weather in Oslo?"}
    first = await events_of(provider, chat(question, tools=(WEATHER_TOOL,), thinking="high"))

    reasoning = "".join(event.text for event in first if isinstance(event, ReasoningDelta))
    assert reasoning == "The user wants Oslo's weather; call the tool."
    (blocks,) = [event for event in first if isinstance(event, ProviderBlocks)]
    second = await events_of(
        provider, chat(question, *tool_round(first, blocks.blocks), tools=(WEATHER_TOOL,), thinking="high")
    )

    assert "".join(event.text for event in second if isinstance(event, TextDelta)) == "It rains in Oslo."
    replayed = fake_anthropic.requests[1].json["messages"][1]["content"]
    assert [block["type"] for block in replayed] == ["thinking", "tool_use"]
    assert replayed[0]["signature"] == blocks.blocks[0]["signature"]
    assert fake_anthropic.requests[1].json["thinking"] == {"type": "enabled", "budget_tokens": 16384}


async def test_the_stand_in_refuses_a_tool_round_whose_thinking_was_altered(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    """The check the replay test relies on: a changed signature is refused, like the API does."""
    fake_anthropic.script(Answer(thinking="call it", tool_calls=[("weather", {"city": "Oslo"})]))
    provider = make_anthropic()
    question = {"role": "user", "content": "weather in Oslo?"}
    first = await events_of(provider, chat(question, tools=(WEATHER_TOOL,), thinking="low"))
    (blocks,) = [event for event in first if isinstance(event, ProviderBlocks)]
    forged = [{**blocks.blocks[0], "signature": "forged"}, *blocks.blocks[1:]]

    with pytest.raises(ProviderRejected, match="Invalid `signature`"):
        await events_of(
            provider, chat(question, *tool_round(first, forged), tools=(WEATHER_TOOL,), thinking="low")
        )


async def test_a_redacted_thinking_block_is_kept_and_replayed_unchanged(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    fake_anthropic.script(
        Answer(
            thinking="Ask the tool.", redacted_thinking=REDACTED, tool_calls=[("weather", {"city": "Oslo"})]
        ),
        Answer(text="It rains in Oslo."),
    )
    provider = make_anthropic()
    question = {"role": "user", "content": "weather in Oslo?"}
    first = await events_of(provider, chat(question, tools=(WEATHER_TOOL,), thinking="high"))
    (blocks,) = [event for event in first if isinstance(event, ProviderBlocks)]
    assert blocks.blocks[1] == {"type": "redacted_thinking", "data": REDACTED}
    # Nothing of the encrypted block reaches the person as reasoning.
    reasoning = "".join(event.text for event in first if isinstance(event, ReasoningDelta))
    assert reasoning == "Ask the tool."

    second = await events_of(
        provider, chat(question, *tool_round(first, blocks.blocks), tools=(WEATHER_TOOL,), thinking="high")
    )

    assert "".join(event.text for event in second if isinstance(event, TextDelta)) == "It rains in Oslo."
    replayed = fake_anthropic.requests[1].json["messages"][1]["content"]
    assert [block["type"] for block in replayed] == ["thinking", "redacted_thinking", "tool_use"]
    assert replayed[1] == {"type": "redacted_thinking", "data": REDACTED}


async def test_the_stand_in_refuses_a_tool_round_without_its_redacted_thinking(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    """The check the redacted replay test relies on: a dropped block is refused, like the API does."""
    fake_anthropic.script(
        Answer(
            thinking="Ask the tool.", redacted_thinking=REDACTED, tool_calls=[("weather", {"city": "Oslo"})]
        )
    )
    provider = make_anthropic()
    question = {"role": "user", "content": "weather in Oslo?"}
    first = await events_of(provider, chat(question, tools=(WEATHER_TOOL,), thinking="high"))
    (blocks,) = [event for event in first if isinstance(event, ProviderBlocks)]
    without = [block for block in blocks.blocks if block["type"] != "redacted_thinking"]

    with pytest.raises(ProviderRejected, match="cannot be modified"):
        await events_of(
            provider, chat(question, *tool_round(first, without), tools=(WEATHER_TOOL,), thinking="high")
        )


async def test_a_round_begun_without_thinking_goes_on_without_it(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    """Calls another provider made (no blocks to replay): thinking is left off for the round's rest."""
    fake_anthropic.script(Answer(text="It rains."))
    assistant = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "id": "call_0", "function": {"name": "weather", "arguments": "{}"}}
        ],
    }
    result = {"role": "tool", "tool_call_id": "call_0", "content": "rain"}
    question = {"role": "user", "content": "weather?"}

    events = await events_of(
        make_anthropic(), chat(question, assistant, result, tools=(WEATHER_TOOL,), thinking="high")
    )

    assert "".join(event.text for event in events if isinstance(event, TextDelta)) == "It rains."
    assert "thinking" not in fake_anthropic.requests[0].json


async def test_the_system_message_is_cut_before_the_sections_that_change_every_turn(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    system = (
        "You are Ada.\n\n## Long-term memory\n- likes tea\n\n"
        "## Recalled from earlier\n- the dentist is on Friday"
    )
    request = chat(
        {"role": "system", "content": system},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second"},
    )

    await events_of(make_anthropic(), request)

    blocks = fake_anthropic.requests[0].json["system"]
    assert "".join(block["text"] for block in blocks) == system
    assert [block["text"].split("\n")[-1] for block in blocks] == [
        "You are Ada.",
        "- likes tea",
        "- the dentist is on Friday",
    ]
    # Persona and memory are cached; what recall found changes every turn and is not.
    assert ["cache_control" in block for block in blocks] == [True, True, False]


async def test_cache_breakpoints_mark_tools_system_and_the_previous_turn(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    request = chat(
        {"role": "system", "content": "Persona prompt."},
        {"role": "system", "content": "Memory: likes tea."},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second"},
        tools=(WEATHER_TOOL, CLOCK_TOOL),
    )
    provider = make_anthropic()

    await events_of(provider, request)
    await events_of(provider, request)

    body = fake_anthropic.requests[0].json
    marked = [
        block["name"] if "name" in block else block["text"]
        for block in [*body["tools"], *body["system"], *(b for m in body["messages"] for b in m["content"])]
        if "cache_control" in block
    ]
    assert marked == ["weather", "Persona prompt.", "Memory: likes tea.", "first answer"]
    first, second = (request.usage for request in fake_anthropic.requests)
    assert first is not None and second is not None
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 0
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]


async def test_usage_counts_cached_tokens_apart(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    request = chat({"role": "system", "content": "Persona prompt " * 40}, {"role": "user", "content": "hi"})
    provider = make_anthropic()
    await events_of(provider, request)

    events = await events_of(provider, request)

    (usage,) = [event for event in events if isinstance(event, Usage)]
    reported = fake_anthropic.requests[1].usage
    assert reported is not None
    assert usage.cached_tokens == reported["cache_read_input_tokens"] > 0
    assert usage.prompt_tokens == reported["input_tokens"] + reported["cache_read_input_tokens"]


async def test_without_caching_no_breakpoint_is_sent(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    await events_of(
        make_anthropic(cache=False),
        chat({"role": "system", "content": "P"}, {"role": "user", "content": "hi"}),
    )

    assert "cache_control" not in str(fake_anthropic.requests[0].json)


async def test_overloaded_is_retried_then_answers(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    fake_anthropic.script(overloaded(), overloaded(), Answer(text="back"))

    text = await make_anthropic().complete(chat({"role": "user", "content": "hi"}))

    assert text == "back"
    assert len(fake_anthropic.requests) == 3


async def test_overloaded_past_the_retries_is_unavailable(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    fake_anthropic.script(overloaded(), overloaded())

    with pytest.raises(ProviderUnavailable, match="busy"):
        await make_anthropic(max_retries=1).complete(chat({"role": "user", "content": "hi"}))


async def test_rate_limit_waits_as_long_as_retry_after_says(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("bot.retries.asyncio.sleep", no_wait)
    fake_anthropic.script(rate_limited(retry_after="7"), Answer(text="ok"))

    assert await make_anthropic().complete(chat({"role": "user", "content": "hi"})) == "ok"
    assert waits == [7.0]


async def test_prompt_too_long_is_an_overflow_with_its_numbers(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    fake_anthropic.script(prompt_too_long(208_310, 200_000))

    with pytest.raises(ContextOverflowError) as raised:
        await make_anthropic().complete(chat({"role": "user", "content": "hi"}))

    assert raised.value.numbers.requested == 208_310
    assert raised.value.numbers.window == 200_000
    assert len(fake_anthropic.requests) == 1


async def test_other_client_errors_are_rejected_at_once(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    fake_anthropic.script(ApiError(400, "invalid_request_error", "max_tokens: field required"))

    with pytest.raises(ProviderRejected, match="max_tokens: field required"):
        await make_anthropic().complete(chat({"role": "user", "content": "hi"}))
    assert len(fake_anthropic.requests) == 1


async def test_a_stream_cut_after_text_is_interrupted_with_the_text(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    fake_anthropic.script(Answer(text="Half of the answer", drop_after_text=True))

    with pytest.raises(StreamInterrupted) as raised:
        await make_anthropic().complete(chat({"role": "user", "content": "hi"}))

    assert raised.value.partial_text == "Half of the answer"
    assert len(fake_anthropic.requests) == 1


async def test_the_next_turn_reads_what_the_previous_turn_wrote(
    fake_anthropic: FakeAnthropic, make_anthropic: Factory
) -> None:
    """The stand-in looks back from a breakpoint for an earlier written prefix, as the API does."""
    system = {"role": "system", "content": "You are Ada. " * 30}
    turn = [system, {"role": "user", "content": "first"}, {"role": "assistant", "content": "one"}]
    provider = make_anthropic()
    await events_of(provider, chat(*turn, {"role": "user", "content": "second"}))
    later = [*turn, {"role": "user", "content": "second"}, {"role": "assistant", "content": "two"}]

    await events_of(provider, chat(*later, {"role": "user", "content": "third"}))

    first, second = (request.usage for request in fake_anthropic.requests)
    assert first is not None and second is not None
    # Through "one" was written by the first turn; the second reads it and writes "second", "two".
    assert (
        second["cache_read_input_tokens"]
        == first["cache_read_input_tokens"] + first["cache_creation_input_tokens"]
    )
    assert second["cache_creation_input_tokens"] > 0


@pytest.mark.parametrize(
    "options",
    [
        {"temperature": 0.9, "top_p": 0.95},  # a persona's sampling, thinking off
        {"temperature": 0.0, "extra": {"purpose": "memory"}},  # memory distillation
        {"max_tokens": 300, "extra": {"purpose": "summary"}},  # a compaction summary
        {"temperature": 0.5, "thinking": "high"},  # a persona with /think high
        {"thinking": "off"},
    ],
    ids=["persona", "distillation", "summary", "thinking-on", "thinking-off"],
)
async def test_each_request_shape_is_sent_through_the_sdks_own_create(
    make_anthropic: Factory, fake_anthropic: FakeAnthropic, options: dict[str, Any]
) -> None:
    provider = make_anthropic()

    answer = await provider.complete(chat({"role": "user", "content": "hi"}, **options))

    assert answer == "reply to: hi"
    (sent,) = fake_anthropic.requests
    accepted = inspect.signature(provider._client.messages.create).parameters
    assert set(sent.json) <= set(accepted), "a parameter the installed SDK does not take was sent"
    assert ("thinking" in sent.json) == (options.get("thinking") == "high")
    assert provider.left_out_settings("claude-test") == tuple(
        name for name in ("temperature", "top_p") if name not in accepted
    )


def test_temperature_goes_alone_where_the_sdk_takes_it() -> None:
    # Current models refuse temperature and top_p together; thinking refuses a temperature.
    both = chat({"role": "user", "content": "hi"}, temperature=0.9, top_p=0.95)
    params, left_out = sendable_params(
        request_params(both), frozenset({"model", "messages", "max_tokens", "temperature"})
    )
    assert (params["temperature"], "top_p" in params, left_out) == (0.9, False, [])
    thinking = request_params(chat({"role": "user", "content": "hi"}, temperature=0.9, thinking="low"))
    assert "temperature" not in thinking
    only_top_p = request_params(chat({"role": "user", "content": "hi"}, top_p=0.95))
    assert sendable_params(only_top_p, frozenset({"model", "messages", "max_tokens"}))[1] == ["top_p"]
