from __future__ import annotations

import json

from bot.providers.base import ChatRequest, Finish, TextDelta, ToolCall
from bot.providers.demo import DemoProvider
from transcript import SummaryItem
from transcript.compaction import summary_request

CONVERSATION = [
    {"role": "system", "content": "You are Ada. Be brief."},
    {"role": "user", "content": "Hello! Here is my plan. [document: plan.pdf]"},
    {"role": "assistant", "content": "Nice plan. Step two looks risky.", "name": "ada"},
    {"role": "user", "content": "Why is it risky? Explain."},
    {"role": "assistant", "content": "It skips testing"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And  what about\nthis   diagram?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    },
]


async def test_reply_names_persona_and_counts_what_it_received() -> None:
    request = ChatRequest(messages=CONVERSATION, model="demo", persona_id="ada", persona_name="Ada")

    reply = await DemoProvider().complete(request)

    assert reply == (
        "[demo] Ada (persona ada) here — I received 4 history messages and 2 attachments. "
        "You said: “And what about this diagram?”. This is the offline demo model; "
        "set CHORUS_MODEL_BASE_URL to use a real one."
    )


async def test_reply_streams_word_by_word_and_is_deterministic() -> None:
    request = ChatRequest(messages=CONVERSATION, model="demo", persona_name="Ada")
    provider = DemoProvider()

    first = [event.text async for event in provider.stream(request) if isinstance(event, TextDelta)]
    second = [event.text async for event in provider.stream(request) if isinstance(event, TextDelta)]

    assert first == second
    assert first[:3] == ["[demo] ", "Ada ", "here "]
    assert "".join(first) == await provider.complete(request)


async def test_singular_counts_long_text_and_no_persona() -> None:
    long_text = "word " * 100
    request = ChatRequest(
        messages=[
            {"role": "assistant", "content": "Greetings."},
            {"role": "user", "content": "[image: cat.png] " + long_text},
        ],
        model="demo",
    )

    reply = await DemoProvider().complete(request)

    assert reply.startswith(
        "[demo] Chorus here — I received 1 history message and 1 attachment. "
        "You said: “[image: cat.png] word word"
    )
    quoted = reply.split("“")[1].split("”")[0]
    assert len(quoted) == 120
    assert quoted.endswith(" wo…")


async def test_summary_request_gets_an_extractive_summary() -> None:
    request = ChatRequest(messages=CONVERSATION, model="demo", extra={"purpose": "summary"})

    summary = await DemoProvider().complete(request)

    assert summary == (
        "[demo summary] Hello! Nice plan. Why is it risky? It skips testing And what about this diagram?"
    )


async def test_summary_is_capped() -> None:
    messages = [{"role": "user", "content": f"Sentence number {n} is here."} for n in range(100)]
    request = ChatRequest(messages=messages, model="demo", extra={"purpose": "summary"})

    summary = await DemoProvider().complete(request)

    assert len(summary) == 800
    assert summary.startswith("[demo summary] Sentence number 0 is here. Sentence number 1")
    assert summary.endswith("…")


RECALL_SCHEMA = {"type": "function", "function": {"name": "recall", "parameters": {"type": "object"}}}
SCHEDULE_SCHEMA = {"type": "function", "function": {"name": "schedule", "parameters": {"type": "object"}}}
CONTEXT_SCHEMA = {
    "type": "function",
    "function": {"name": "context_inspect", "parameters": {"type": "object"}},
}
ALL_TOOLS = (RECALL_SCHEMA, SCHEDULE_SCHEMA, CONTEXT_SCHEMA)


async def events_for(text: str, tools: tuple[dict[str, object], ...] = ALL_TOOLS) -> list[object]:
    request = ChatRequest(messages=[{"role": "user", "content": text}], model="demo", tools=tools)
    return [event async for event in DemoProvider().stream(request)]


async def test_the_demo_calls_the_offered_tool_a_phrase_asks_for() -> None:
    recall = await events_for("What did I say about the dentist?")
    remind = await events_for("remind me in 10 minutes to stretch")
    context = await events_for("How full is your context?")

    assert recall == [ToolCall("demo_call_1", "recall", '{"query": "the dentist"}'), Finish("tool_calls")]
    assert remind[0] == ToolCall("demo_call_1", "schedule", '{"text": "stretch", "in_seconds": 600}')
    assert context[0] == ToolCall("demo_call_1", "context_inspect", "{}")


async def test_without_the_tool_offered_the_demo_answers_in_text() -> None:
    answer = await events_for("What did I say about the dentist?", tools=(CONTEXT_SCHEMA,))

    assert all(isinstance(event, TextDelta | Finish) for event in answer)
    assert answer[-1] == Finish("stop")


async def test_the_demo_answers_from_tool_results() -> None:
    messages = [
        {"role": "user", "content": "What did I say about the dentist?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "demo_call_1", "type": "function", "function": {"name": "recall", "arguments": "{}"}}
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "demo_call_1",
            "content": json.dumps(
                {
                    "query": "dentist",
                    "hits": [{"text": "Grace: dentist on Friday at 9", "date": "2026-11-30"}],
                }
            ),
        },
    ]
    request = ChatRequest(messages=messages, model="demo", tools=ALL_TOOLS)

    answer = await DemoProvider().complete(request)

    assert answer == "[demo] I searched my memory for “dentist”: Grace: dentist on Friday at 9 (2026-11-30)."


async def test_a_summary_after_the_conversation_summarises_the_lines_its_instruction_lists() -> None:
    items = [SummaryItem(1, "#1 Alice (user): We ship on Friday. Then we rest.", 12)]
    messages = summary_request(items, prefix=[{"role": "system", "content": "You are Ada."}, *CONVERSATION])
    request = ChatRequest(messages=messages, model="demo", extra={"purpose": "summary"})

    summary = await DemoProvider().complete(request)

    assert summary == "[demo summary] We ship on Friday."
