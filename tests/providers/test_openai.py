from __future__ import annotations

import asyncio
import socket
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from bot.errors import (
    ContextOverflowError,
    ProviderProtocolError,
    ProviderRejected,
    ProviderUnavailable,
    StreamInterrupted,
)
from bot.providers.base import ChatRequest, Finish, TextDelta, Usage
from bot.providers.openai import OpenAICompatibleProvider
from tests.fakes.openai_server import (
    Drop,
    FakeOpenAI,
    Hang,
    HttpError,
    Malformed,
    Reply,
    StreamError,
    Writes,
    bad_request,
    context_overflow,
    rate_limited,
    server_error,
)
from tests.providers.conftest import ProviderFactory
from transcript import PROVIDER_BLOCKS_KEY


def chat(text: str = "hi", **fields: Any) -> ChatRequest:
    return ChatRequest(
        messages=[
            {"role": "system", "content": "You are Ada."},
            {"role": "user", "content": text, "name": "Grace"},
        ],
        model="test-model",
        **fields,
    )


async def collect(provider: OpenAICompatibleProvider, request: ChatRequest) -> list[str]:
    """The text deltas of an answer."""
    return [event.text async for event in provider.stream(request) if isinstance(event, TextDelta)]


# --- streaming and the request ------------------------------------------------


async def test_streams_deltas_in_order(fake_openai: FakeOpenAI, make_provider: ProviderFactory) -> None:
    fake_openai.script(Reply("Hello there, Grace!", chunks=["Hel", "lo there", ", Grace", "!"]))

    deltas = await collect(make_provider(), chat())

    assert deltas == ["Hel", "lo there", ", Grace", "!"]
    assert [(r.method, r.path) for r in fake_openai.requests] == [("POST", "/v1/chat/completions")]


async def test_the_events_of_one_chunk_go_on_as_one_delta_and_a_cut_event_still_parses(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    cut = fake_openai.event(", Grace")
    rest_may_go = asyncio.Event()
    fake_openai.script(
        Writes(
            (
                # One chunk: two whole events and the first half of a third.
                fake_openai.event("Hel") + fake_openai.event("lo there") + cut[:20],
                # Sent only once the first chunk was read and handed on, so it is a chunk of its own.
                rest_may_go,
                cut[20:] + fake_openai.event("!") + fake_openai.finish(),
            )
        )
    )

    deltas: list[str] = []
    async for event in make_provider().stream(chat()):
        if isinstance(event, TextDelta):
            deltas.append(event.text)
            rest_may_go.set()

    assert deltas == ["Hello there", ", Grace!"]


async def test_complete_joins_the_stream(fake_openai: FakeOpenAI, make_provider: ProviderFactory) -> None:
    assert await make_provider().complete(chat("what is 2+2?")) == "reply to: what is 2+2?"


async def test_body_holds_set_fields_and_extra_but_not_purpose(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    request = chat(
        temperature=0.2,
        max_tokens=50,
        extra={"purpose": "summary", "seed": 7, "model": "ignored"},
    )

    await make_provider().complete(request)

    recorded = fake_openai.requests[0]
    assert recorded.body == (
        b'{"model":"test-model","messages":[{"role":"system","content":"You are Ada."},'
        b'{"role":"user","content":"hi","name":"Grace"}],"stream":true,'
        b'"stream_options":{"include_usage":true},"temperature":0.2,"max_tokens":50,"seed":7}'
    )
    assert recorded.headers["content-type"] == "application/json"
    assert recorded.headers["x-chorus-purpose"] == "summary"


async def test_identical_requests_send_identical_bytes(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    provider = make_provider()
    await provider.complete(chat("Grüße — “quoted” 日本", top_p=0.9))
    await provider.complete(chat("Grüße — “quoted” 日本", top_p=0.9))

    first, second = fake_openai.requests
    assert first.body == second.body
    # Non-ASCII text travels as UTF-8, not as \u escapes.
    assert "Grüße — “quoted” 日本".encode() in first.body


async def test_authorization_header_only_with_a_key(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    await make_provider(api_key="sk-secret").complete(chat())
    await make_provider(api_key=None).complete(chat())

    with_key, without_key = fake_openai.requests
    assert with_key.headers["authorization"] == "Bearer sk-secret"
    assert "authorization" not in without_key.headers


async def test_image_parts_pass_through_unchanged(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    parts = [
        {"type": "text", "text": "What is in this picture?"},
        {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
        },
    ]
    request = ChatRequest(messages=[{"role": "user", "content": parts}], model="vision")

    reply = await make_provider().complete(request)

    assert fake_openai.requests[0].json["messages"] == [{"role": "user", "content": parts}]
    assert reply == "reply to: What is in this picture?"


# --- retries --------------------------------------------------------------------


async def test_429_retry_after_zero_is_honoured_then_succeeds(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(rate_limited("0"), rate_limited("0"), "finally")
    # Without Retry-After this backoff would sleep 5 s and then 10 s.
    provider = make_provider(backoff_base=5.0)

    started = time.monotonic()
    reply = await provider.complete(chat())

    assert reply == "finally"
    assert len(fake_openai.requests) == 3
    assert time.monotonic() - started < 2.0


async def test_retry_after_seconds_are_waited(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(rate_limited("0.3"), "ok")

    started = time.monotonic()
    assert await make_provider().complete(chat()) == "ok"

    assert time.monotonic() - started >= 0.3
    assert len(fake_openai.requests) == 2


async def test_retry_after_http_date_is_capped_by_max_backoff(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    in_an_hour = format_datetime(datetime.now(UTC) + timedelta(hours=1), usegmt=True)
    fake_openai.script(rate_limited(in_an_hour), "ok")

    started = time.monotonic()
    assert await make_provider(max_backoff=0.2).complete(chat()) == "ok"

    assert 0.2 <= time.monotonic() - started < 1.5


async def test_server_errors_end_in_unavailable_after_max_retries(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(*[server_error(500)] * 3, server_error(503), "never reached")

    with pytest.raises(ProviderUnavailable) as caught:
        await make_provider(max_retries=3).complete(chat())

    assert len(fake_openai.requests) == 4
    assert fake_openai.unused_script == 1
    assert str(caught.value) == "The model is busy right now (HTTP 503). Try again in a minute."


async def test_read_timeout_is_retried_then_unavailable(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(Hang(5), Hang(5))

    with pytest.raises(ProviderUnavailable) as caught:
        await make_provider(read_timeout=0.3, max_retries=1).complete(chat())

    assert len(fake_openai.requests) == 2
    assert "no answer within 0.3 seconds" in str(caught.value)


async def test_read_timeout_then_success(fake_openai: FakeOpenAI, make_provider: ProviderFactory) -> None:
    fake_openai.script(Hang(5), "back again")

    assert await make_provider(read_timeout=0.3).complete(chat()) == "back again"
    assert len(fake_openai.requests) == 2


async def test_unreachable_server_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAICompatibleProvider(f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_base=0.001)

    with pytest.raises(ProviderUnavailable, match="unreachable right now \\(could not connect\\)"):
        await provider.complete(chat())
    await provider.aclose()


async def test_drop_before_any_text_is_retried(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(Drop(""), "second try")

    assert await make_provider().complete(chat()) == "second try"
    assert len(fake_openai.requests) == 2


async def test_in_stream_overload_before_text_is_retried(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(StreamError({"message": "Overloaded", "type": "overloaded_error"}), "ok")

    assert await make_provider().complete(chat()) == "ok"
    assert len(fake_openai.requests) == 2


# --- errors that are never retried ------------------------------------------------


@pytest.mark.parametrize(
    "response",
    [
        context_overflow(413),
        context_overflow(400),
        HttpError(400, {"error": {"message": "prompt is too long: 210000 tokens > 200000"}}),
        HttpError(400, "the request exceeds the available context size"),
        HttpError(422, {"detail": "Too many tokens in the input"}),
    ],
    ids=["413", "context_length_exceeded", "prompt-too-long", "llama-cpp-text", "detail"],
)
async def test_context_overflow(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory, response: HttpError
) -> None:
    fake_openai.script(response, "not used")

    with pytest.raises(ContextOverflowError, match="too long for the model's context window"):
        await make_provider().complete(chat())

    assert len(fake_openai.requests) == 1


async def test_in_stream_context_error_is_overflow(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(StreamError({"message": "too long", "code": "context_length_exceeded"}))

    with pytest.raises(ContextOverflowError):
        await make_provider().complete(chat())


async def test_other_400_is_rejected_with_the_providers_message(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(bad_request("Invalid value for 'temperature': 7"), "not used")

    with pytest.raises(ProviderRejected) as caught:
        await make_provider().complete(chat())

    assert str(caught.value) == (
        "The model provider refused the request (HTTP 400): Invalid value for 'temperature': 7."
    )
    assert len(fake_openai.requests) == 1


async def test_401_is_rejected(fake_openai: FakeOpenAI, make_provider: ProviderFactory) -> None:
    fake_openai.script(HttpError(401, {"error": {"message": "Incorrect API key provided"}}))

    with pytest.raises(ProviderRejected, match="HTTP 401\\): Incorrect API key provided"):
        await make_provider().complete(chat())


async def test_429_out_of_quota_is_rejected_not_retried(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    quota = {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}
    fake_openai.script(HttpError(429, quota), "not used")

    with pytest.raises(ProviderRejected, match="exceeded your current quota"):
        await make_provider().complete(chat())

    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize(
    "data", ["{this is not json", '{"id": "chatcmpl-1", "object": "chat.completion.chunk"}', "[1]"]
)
async def test_malformed_stream_is_a_protocol_error(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory, data: str
) -> None:
    fake_openai.script(Malformed(data))

    with pytest.raises(ProviderProtocolError, match="cannot read"):
        await make_provider().complete(chat())

    assert len(fake_openai.requests) == 1


# --- streams that break after text --------------------------------------------------


async def test_drop_after_text_is_interrupted_with_the_partial_text(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(Drop("Once upon a time"), "not used")
    received: list[str] = []

    with pytest.raises(StreamInterrupted) as caught:
        async for event in make_provider().stream(chat()):
            if isinstance(event, TextDelta):
                received.append(event.text)

    assert caught.value.partial_text == "Once upon a time"
    assert "".join(received) == "Once upon a time"
    assert "the connection dropped" in str(caught.value)
    assert len(fake_openai.requests) == 1


async def test_stream_ending_without_done_or_finish_is_interrupted(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(Drop("Half a", clean=True))

    with pytest.raises(StreamInterrupted) as caught:
        await make_provider().complete(chat())

    assert caught.value.partial_text == "Half a"


async def test_read_timeout_after_text_is_interrupted(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(Hang(5, after_text="Thinking about"))

    with pytest.raises(StreamInterrupted) as caught:
        await make_provider(read_timeout=0.3).complete(chat())

    assert caught.value.partial_text == "Thinking about"
    assert len(fake_openai.requests) == 1


async def test_in_stream_error_after_text_is_interrupted(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(StreamError({"message": "upstream died"}, after_text="The answer is"))

    with pytest.raises(StreamInterrupted) as caught:
        await make_provider().complete(chat())

    assert caught.value.partial_text == "The answer is"


async def test_usage_reports_the_prompt_tokens_the_server_read_from_its_cache(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    provider = make_provider()
    first = [event async for event in provider.stream(chat("hi"))]
    second = [event async for event in provider.stream(chat("hi again"))]

    assert fake_openai.requests[0].json["stream_options"] == {"include_usage": True}
    first_usage = next(event for event in first if isinstance(event, Usage))
    second_usage = next(event for event in second if isinstance(event, Usage))
    assert first_usage.cached_tokens == 0 and first_usage.prompt_tokens > 0
    # The second request repeats the system message: that prefix was cached.
    assert 0 < second_usage.cached_tokens < second_usage.prompt_tokens
    assert isinstance(second[-1], Finish)


async def test_another_providers_blocks_stay_out_of_the_body(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    blocks = {"provider": "anthropic", "blocks": [{"type": "thinking", "thinking": "t", "signature": "s"}]}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", PROVIDER_BLOCKS_KEY: blocks},
        {"role": "user", "content": "and?"},
    ]
    request = ChatRequest(messages=messages, model="test-model")

    await make_provider().complete(request)

    assert fake_openai.requests[0].json["messages"][1] == {"role": "assistant", "content": "hello"}
