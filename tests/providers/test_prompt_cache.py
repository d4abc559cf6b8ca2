"""What each server says it reused of a prompt reaches `Usage`, in that server's own words.

The stand-in servers speak each API's usage as its reference gives it: OpenAI's
`prompt_tokens_details.cached_tokens`, llama.cpp's `timings` (`cache_n`, `prompt_n`),
DeepSeek's `prompt_cache_hit_tokens` / `prompt_cache_miss_tokens`, Anthropic's
`cache_read_input_tokens` / `cache_creation_input_tokens`. A server that says nothing of its
cache leaves the reuse unknown (None), never 0.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.providers.anthropic import AnthropicProvider
from bot.providers.base import ChatProvider, ChatRequest, Usage
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, bad_request
from tests.providers.conftest import ProviderFactory

LONG_SYSTEM = "You are Ada, who answers in full sentences and never in lists. " * 8


def chat(text: str, model: str = "test-model") -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "system", "content": LONG_SYSTEM}, {"role": "user", "content": text}],
        model=model,
    )


async def usage_of(provider: ChatProvider, request: ChatRequest) -> Usage | None:
    found = [event async for event in provider.stream(request) if isinstance(event, Usage)]
    assert len(found) <= 1
    return found[0] if found else None


async def two_turns(provider: ChatProvider, model: str = "test-model") -> tuple[Usage, Usage]:
    first = await usage_of(provider, chat("hi", model))
    second = await usage_of(provider, chat("hi again", model))
    assert first is not None and second is not None
    return first, second


async def test_openai_cached_tokens_are_what_the_server_reused(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    first, second = await two_turns(make_provider())

    assert first.cached_tokens == 0 and first.evaluated_tokens == first.prompt_tokens
    # The second request repeats the system prompt: that prefix was reused.
    assert second.cached_tokens is not None and 0 < second.cached_tokens < second.prompt_tokens
    assert second.evaluated_tokens == second.prompt_tokens - second.cached_tokens


async def test_llama_cpp_timings_give_the_reused_and_the_evaluated_tokens(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.usage_shape = "llama.cpp"

    _, second = await two_turns(make_provider())

    assert second.cached_tokens is not None and second.cached_tokens > 0
    assert second.evaluated_tokens is not None and second.evaluated_tokens > 0
    assert second.prompt_tokens == second.cached_tokens + second.evaluated_tokens


async def test_llama_cpp_timings_are_read_when_the_server_refused_to_send_usage(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.usage_shape = "llama.cpp"
    # A server that refuses `stream_options` is asked without it: its timings still come.
    fake_openai.script(bad_request("Unrecognized request argument supplied: stream_options"))

    _, second = await two_turns(make_provider())

    assert "stream_options" not in fake_openai.requests[-1].json
    assert second.cached_tokens is not None and second.cached_tokens > 0
    assert second.prompt_tokens == second.cached_tokens + (second.evaluated_tokens or 0)


async def test_deepseek_cache_hit_tokens_are_what_the_server_reused(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.usage_shape = "deepseek"

    first, second = await two_turns(make_provider())

    assert first.cached_tokens == 0
    assert second.cached_tokens is not None and 0 < second.cached_tokens < second.prompt_tokens


async def test_a_server_silent_on_its_cache_leaves_the_reuse_unknown(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.usage_shape = "bare"

    first, second = await two_turns(make_provider())

    assert first.prompt_tokens > 0 and second.prompt_tokens > 0
    assert first.cached_tokens is None and second.cached_tokens is None
    assert second.evaluated_tokens is None
    # A turn of several calls stays unknown when any of them was.
    assert (second + Usage(prompt_tokens=5, cached_tokens=5)).cached_tokens is None


@pytest.fixture
async def anthropic(fake_anthropic: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    provider = AnthropicProvider("test-key", base_url=fake_anthropic.base_url, backoff_base=0.001)
    yield provider
    await provider.aclose()


async def test_anthropic_cache_reads_are_reused_and_cache_writes_evaluated(
    fake_anthropic: FakeAnthropic, anthropic: AnthropicProvider
) -> None:
    first, second = await two_turns(anthropic, model="claude-test")

    reported = fake_anthropic.requests[1].usage
    assert reported is not None
    assert first.cached_tokens == 0 and first.cache_write_tokens > 0
    assert second.cached_tokens == reported["cache_read_input_tokens"] > 0
    assert second.evaluated_tokens == reported["input_tokens"] + reported["cache_creation_input_tokens"]


async def test_anthropic_usage_without_cache_fields_leaves_the_reuse_unknown(
    fake_anthropic: FakeAnthropic, anthropic: AnthropicProvider
) -> None:
    fake_anthropic.reports_cache = False

    _, second = await two_turns(anthropic, model="claude-test")

    reported = fake_anthropic.requests[1].usage
    assert reported is not None and "cache_read_input_tokens" not in reported
    assert second.prompt_tokens == reported["input_tokens"]
    assert second.cached_tokens is None and second.evaluated_tokens is None
