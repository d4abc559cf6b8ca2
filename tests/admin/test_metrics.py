"""/metrics counts what the engine, the provider and context and memory work did."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from bot.jobs import MAINTAIN_CONTEXT
from bot.providers.base import ChatRequest, ModelEvent
from bot.providers.openai import OpenAICompatibleProvider
from bot.runtime import Runtime
from bot.turns.events import Delta
from channels.web.app import create_app
from tests.admin.conftest import BASE_URL
from tests.admin.seed import BEARER, admin_runtime, seed
from tests.fakes.openai_server import FakeOpenAI, Hang, Reply, context_overflow, rate_limited, server_error
from tests.support.runtime import inbound

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(runtime: Runtime) -> Samples:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(runtime)), base_url=BASE_URL
    ) as http:
        response = await http.get("/metrics", headers=BEARER)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest_asyncio.fixture
async def model_runtime(tmp_path: Path, fake_openai: FakeOpenAI) -> AsyncIterator[Runtime]:
    provider = OpenAICompatibleProvider(fake_openai.base_url, "key", max_retries=1, backoff_base=0.01)
    runtime = admin_runtime(tmp_path, provider, memory_enabled="false")
    yield runtime
    await runtime.aclose()


async def test_turns_latency_tokens_retries_and_errors(
    model_runtime: Runtime, fake_openai: FakeOpenAI
) -> None:
    before = await scrape(model_runtime)
    fake_openai.script(rate_limited(), Reply("fine, thanks for asking"))
    answered = await model_runtime.engine.respond(inbound("how are you?", lane="discord", chat_id="c1"))
    assert answered.kind == "assistant"
    fake_openai.script(server_error(503), server_error(503))
    failed = await model_runtime.engine.respond(inbound("and now?", lane="discord", chat_id="c1"))
    assert failed.kind == "error"
    await model_runtime.engine.drain()
    after = await scrape(model_runtime)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("chorus_turns_total", lane="discord", outcome="complete") == 1
    assert grew("chorus_turns_total", lane="discord", outcome="error") == 1
    assert grew("chorus_time_to_first_token_seconds_count", lane="discord") == 1
    assert grew("chorus_turn_duration_seconds_count", lane="discord") == 2
    assert grew("chorus_provider_retries_total", reason="busy") == 2
    assert grew("chorus_provider_errors_total", kind="ProviderUnavailable") == 1
    # Tokens: what both requests carried in, and the reply's words out.
    assert grew("chorus_tokens_total", direction="in") >= 2 * 20
    assert grew("chorus_tokens_total", direction="out") == 5
    assert value(after, "chorus_active_streams", lane="discord") == 0
    assert ("chorus_job_queue_depth", ()) in after


async def test_active_streams_while_a_reply_streams(model_runtime: Runtime, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply("slow words arrive one by one", delay=0.2))
    before = value(await scrape(model_runtime), "chorus_active_streams", lane="web")
    stream = model_runtime.engine.stream(inbound("talk slowly"))
    first = await anext(stream)
    assert isinstance(first, Delta)
    assert value(await scrape(model_runtime), "chorus_active_streams", lane="web") == before + 1
    async for _ in stream:
        pass
    assert value(await scrape(model_runtime), "chorus_active_streams", lane="web") == before


async def test_overflow_recovery_and_its_collapse_are_counted(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    provider = OpenAICompatibleProvider(fake_openai.base_url, "key", max_retries=0)
    runtime = admin_runtime(
        tmp_path,
        provider,
        memory_enabled="false",
        context_compact_dropped_messages="1000",
        context_collapse_range_messages="4",
    )
    try:
        for number in range(1, 5):
            await runtime.engine.respond(inbound(f"topic {number}"))
            await runtime.engine.drain()
        before = await scrape(runtime)
        fake_openai.script(context_overflow(413))
        reply = await runtime.engine.respond(inbound("and now?"))
        assert reply.kind == "assistant"
        await runtime.engine.drain()
        after = await scrape(runtime)
        assert (
            value(after, "chorus_overflow_recoveries_total")
            - value(before, "chorus_overflow_recoveries_total")
            == 1
        )
        assert value(after, "chorus_collapses_total") - value(before, "chorus_collapses_total") == 1
        assert (
            value(after, "chorus_provider_errors_total", kind="ContextOverflowError")
            - value(before, "chorus_provider_errors_total", kind="ContextOverflowError")
            == 1
        )
    finally:
        await runtime.aclose()


async def test_compactions_are_counted_as_context_management_does_them(tmp_path: Path) -> None:
    runtime = admin_runtime(
        tmp_path, memory_enabled="false", model_context_window="1400", context_collapse_range_messages="2"
    )
    try:
        before = await scrape(runtime)
        for number in range(12):
            words = " ".join(f"word{number}-{index}" for index in range(40))
            await runtime.engine.respond(inbound(f"message {number}: {words}"))
            await runtime.engine.drain()
        after = await scrape(runtime)
        assert runtime.context is not None
        counters = runtime.context.counters
        assert counters.compactions >= 1
        grew = value(after, "chorus_compactions_total") - value(before, "chorus_compactions_total")
        assert grew == counters.compactions
    finally:
        await runtime.aclose()


async def test_memory_offloads_are_counted(runtime: Runtime) -> None:
    before = value(await scrape(runtime), "chorus_memory_offloads_total")
    await seed(runtime)
    assert value(await scrape(runtime), "chorus_memory_offloads_total") == before + 1


async def test_job_queue_depth_is_read_at_scrape_time(runtime: Runtime) -> None:
    release = asyncio.Event()

    async def slow_job(_session_id: str, _seq: int) -> None:
        await release.wait()

    runtime.jobs.definitions.add(MAINTAIN_CONTEXT, slow_job)
    await runtime.engine.respond(inbound("hello"))
    assert value(await scrape(runtime), "chorus_job_queue_depth") == runtime.engine.pending_jobs >= 1
    release.set()
    await runtime.engine.drain()
    # The idle memory flush still waits for its time: it is not queued work yet.
    assert value(await scrape(runtime), "chorus_job_queue_depth") == 0


async def test_a_stopped_turn_is_counted_as_stopped(model_runtime: Runtime, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Hang(seconds=60, after_text="Once upon a time"))
    before = value(await scrape(model_runtime), "chorus_turns_total", lane="web", outcome="stopped")
    stream = model_runtime.engine.stream(inbound("tell me a long story", user_id="stopper"))
    assert isinstance(await anext(stream), Delta)
    [(chat, _count)] = model_runtime.stores.sessions.list_sessions()
    assert model_runtime.engine.stop_turn(chat.id)
    events = [event async for event in stream]
    assert events[-1].status == "stopped"  # type: ignore[union-attr]
    after = value(await scrape(model_runtime), "chorus_turns_total", lane="web", outcome="stopped")
    assert after == before + 1


async def test_tokens_in_are_the_context_the_turn_sent(tmp_path: Path) -> None:
    runtime = admin_runtime(tmp_path, memory_enabled="false")
    sent: list[int] = []
    stream = runtime.engine.provider.stream

    def remember(request: ChatRequest) -> AsyncIterator[ModelEvent]:
        # The tokens of the context the turn sent.
        sent.append(request.prompt_tokens or 0)
        return stream(request)

    runtime.engine.provider.stream = remember  # type: ignore[method-assign]
    try:
        before = value(await scrape(runtime), "chorus_tokens_total", direction="in")
        await runtime.engine.respond(inbound("count me in, please"))
        await runtime.engine.drain()
        after = value(await scrape(runtime), "chorus_tokens_total", direction="in")
        assert after - before == sent[0] > 0
    finally:
        await runtime.aclose()
