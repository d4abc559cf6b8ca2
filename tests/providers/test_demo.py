from __future__ import annotations

from bot.providers.base import ChatRequest, TextDelta
from bot.providers.demo import DemoProvider

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
