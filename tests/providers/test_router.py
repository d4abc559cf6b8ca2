"""Failover through `ModelRouter`: the next key, then the next endpoint, before the answer starts."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import pytest

from bot.config import ModelChoiceSettings, ModelSettings
from bot.errors import ConfigError, ProviderRejected, ProviderUnavailable, StreamInterrupted
from bot.metrics import REGISTRY
from bot.providers.base import ChatRequest, Served, TextDelta
from bot.providers.router import ModelRouter, make_router
from tests.fakes.anthropic_server import FakeAnthropic, RecordedRequest
from tests.fakes.anthropic_server import overloaded as anthropic_overloaded
from tests.fakes.anthropic_server import rate_limited as anthropic_rate_limited
from tests.fakes.openai_server import (
    Drop,
    FakeOpenAI,
    Hang,
    HttpError,
    overloaded,
    payment_required,
    rate_limited,
    refused_url,
    server_error,
)
from tests.fakes.small_model_server import SmallModelServer


@pytest.fixture
async def backup() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def chat(text: str = "hi") -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], model="main-model")


def failovers(reason: str) -> float:
    return REGISTRY.get_sample_value("chorus_model_failovers_total", {"reason": reason}) or 0.0


def anthropic_key(request: RecordedRequest) -> str:
    """The key a request to the Anthropic stand-in carried (the SDK sends either header)."""
    return request.headers.get("x-api-key") or request.headers["authorization"].removeprefix("Bearer ")


def settings(base_url: str, **fields: Any) -> ModelSettings:
    return ModelSettings(base_url=base_url, name="main-model", **fields)


async def answer(router: ModelRouter, request: ChatRequest) -> tuple[str, list[Served]]:
    text: list[str] = []
    served: list[Served] = []
    async for event in router.stream(request):
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, Served):
            served.append(event)
    return "".join(text), served


@pytest.mark.parametrize(
    ("failure", "reason"), [(overloaded(), "server_error"), (rate_limited("0"), "rate_limited")]
)
async def test_a_busy_endpoint_hands_the_request_to_the_fallback_once(
    fake_openai: FakeOpenAI, backup: FakeOpenAI, failure: HttpError, reason: str
) -> None:
    fake_openai.script(failure)
    router = make_router(
        settings(
            fake_openai.base_url, api_key="k1", fallbacks=[{"base_url": backup.base_url, "name": "spare"}]
        )
    )
    before = failovers(reason)

    text, served = await answer(router, chat())

    assert text == "reply to: hi"
    assert len(fake_openai.requests) == 1  # asked once: no retries when another can answer
    assert [request.json["model"] for request in backup.requests] == ["spare"]
    assert served == [Served("spare", "openai")]
    assert failovers(reason) == before + 1
    await router.aclose()


async def test_a_single_endpoint_keeps_its_retries(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(rate_limited("0"), "second try")
    router = make_router(settings(fake_openai.base_url, max_retries=2))

    text, served = await answer(router, chat())

    assert text == "second try"
    assert len(fake_openai.requests) == 2
    assert served == [Served("main-model", "openai")]
    await router.aclose()


async def test_a_rate_limited_key_rests_while_the_next_key_answers(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(rate_limited("60"))
    now = [1000.0]
    router = make_router(settings(fake_openai.base_url, api_keys=["key-one", "key-two"]))
    router._clock = lambda: now[0]  # the test's clock: no waiting for the minute to pass

    assert (await answer(router, chat("first")))[0] == "reply to: first"
    assert (await answer(router, chat("second")))[0] == "reply to: second"
    now[0] += 61
    fake_openai.script("after the rest")
    assert (await answer(router, chat("third")))[0] == "after the rest"

    keys = [request.headers["authorization"] for request in fake_openai.requests]
    # The first key was refused, rested for its Retry-After (the second turn went to the
    # second key directly), and is used again once the minute passed.
    assert keys == ["Bearer key-one", "Bearer key-two", "Bearer key-two", "Bearer key-one"]
    await router.aclose()


async def test_every_key_resting_is_a_clear_busy_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(rate_limited("30"), payment_required())
    router = make_router(settings(fake_openai.base_url, api_keys=["key-one", "key-two"]))
    now = 50.0
    router._clock = lambda: now

    with pytest.raises(ProviderRejected, match="HTTP 402"):
        await answer(router, chat())
    with pytest.raises(ProviderUnavailable, match="busy right now .* Try again in 30 seconds"):
        await answer(router, chat())
    assert len(fake_openai.requests) == 2
    await router.aclose()


async def test_a_refused_connection_moves_to_the_next_fallback(backup: FakeOpenAI) -> None:
    router = make_router(settings(refused_url(), fallbacks=[{"base_url": backup.base_url, "name": "spare"}]))
    before = failovers("unreachable")

    text, served = await answer(router, chat())

    assert text == "reply to: hi"
    assert served == [Served("spare", "openai")]
    assert failovers("unreachable") == before + 1
    await router.aclose()


async def test_a_key_out_of_credit_hands_over_to_the_next_key(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(payment_required())
    router = make_router(settings(fake_openai.base_url, api_keys=["key-one", "key-two"]))
    before = failovers("payment")

    text, _ = await answer(router, chat())

    assert text == "reply to: hi"
    keys = [request.headers["authorization"] for request in fake_openai.requests]
    assert keys == ["Bearer key-one", "Bearer key-two"]
    assert failovers("payment") == before + 1
    await router.aclose()


async def test_silence_before_the_first_token_moves_to_the_fallback(
    fake_openai: FakeOpenAI, backup: FakeOpenAI
) -> None:
    fake_openai.script(Hang(30))
    router = make_router(
        settings(fake_openai.base_url, read_timeout=0.3, fallbacks=[{"base_url": backup.base_url}])
    )
    before = failovers("timeout")

    text, served = await answer(router, chat())

    assert text == "reply to: hi"
    assert served == [Served("main-model", "openai")]
    assert len(fake_openai.requests) == 1 and len(backup.requests) == 1
    assert failovers("timeout") == before + 1
    await router.aclose()


async def test_a_stream_that_breaks_after_text_is_not_failed_over(
    fake_openai: FakeOpenAI, backup: FakeOpenAI
) -> None:
    fake_openai.script(Drop("half an answer"))
    router = make_router(settings(fake_openai.base_url, fallbacks=[{"base_url": backup.base_url}]))

    with pytest.raises(StreamInterrupted) as interrupted:
        await answer(router, chat())

    assert interrupted.value.partial_text == "half an answer"
    assert backup.requests == []
    await router.aclose()


async def test_the_last_endpoints_failure_is_what_the_person_reads(
    fake_openai: FakeOpenAI, backup: FakeOpenAI
) -> None:
    fake_openai.script(server_error(503))
    backup.script(server_error(502))
    router = make_router(settings(fake_openai.base_url, fallbacks=[{"base_url": backup.base_url}]))

    with pytest.raises(ProviderUnavailable, match="HTTP 502"):
        await answer(router, chat())
    await router.aclose()


async def test_keys_never_reach_logs_or_errors(
    fake_openai: FakeOpenAI,
    backup: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret, spare_secret = "sk-live-very-secret-1", "sk-live-very-secret-2"
    monkeypatch.setenv("SPARE_KEY", spare_secret)
    fake_openai.script(HttpError(429, {"error": {"message": f"Rate limit for key {secret}"}}))
    backup.script(HttpError(401, {"error": {"message": f"Incorrect API key provided: {spare_secret}"}}))
    caplog.set_level(logging.DEBUG)
    router = make_router(
        settings(
            fake_openai.base_url,
            api_key=secret,
            fallbacks=[{"base_url": backup.base_url, "api_key": "${SPARE_KEY}"}],
        )
    )

    with pytest.raises(ProviderRejected) as refused:
        await answer(router, chat())

    assert backup.requests[0].headers["authorization"] == f"Bearer {spare_secret}"
    assert "HTTP 401" in str(refused.value)
    port = urlsplit(fake_openai.base_url).port
    assert f"model endpoint 127.0.0.1:{port} could not answer (rate_limited" in caplog.text
    for key in (secret, spare_secret):
        assert key not in str(refused.value)
        assert key not in caplog.text
    await router.aclose()


async def test_a_model_with_its_own_endpoint_is_asked_there_then_the_fallbacks(
    fake_openai: FakeOpenAI, backup: FakeOpenAI
) -> None:
    async with FakeOpenAI() as local:
        local.script(server_error(503))
        router = make_router(
            settings(fake_openai.base_url, fallbacks=[{"base_url": backup.base_url, "name": "spare"}]),
            [ModelChoiceSettings(name="local", model="llama", base_url=local.base_url)],
        )

        local_text, _ = await answer(router, replace(chat(), model="llama"))
        main_text, _ = await answer(router, chat())
        await router.aclose()

    assert [request.json["model"] for request in local.requests] == ["llama"]
    assert [request.json["model"] for request in backup.requests] == ["spare"]
    assert [request.json["model"] for request in fake_openai.requests] == ["main-model"]
    assert local_text == main_text == "reply to: hi"


async def test_an_endpoint_is_named_by_host_never_by_credentials_in_its_url() -> None:
    router = make_router(settings("https://user:sk-in-the-url@api.example.com/v1", api_keys=["sk-a", "sk-b"]))

    labels = [target.label for target in router.targets_for("main-model")]

    assert labels == ["api.example.com key 1 of 2", "api.example.com key 2 of 2"]
    await router.aclose()


async def test_an_overloaded_anthropic_endpoint_falls_back_to_an_openai_compatible_one(
    fake_anthropic: FakeAnthropic, backup: FakeOpenAI
) -> None:
    fake_anthropic.script(anthropic_overloaded())
    router = make_router(
        ModelSettings(
            provider="anthropic",
            base_url=fake_anthropic.base_url,
            name="claude-main",
            api_key="sk-ant",
            fallbacks=[{"base_url": backup.base_url, "name": "spare"}],
        )
    )
    before = failovers("server_error")

    text, served = await answer(router, replace(chat(), model="claude-main"))

    assert text == "reply to: hi"
    assert len(fake_anthropic.requests) == 1  # no retry of its own: the fallback answers
    assert anthropic_key(fake_anthropic.requests[0]) == "sk-ant"
    assert [request.json["model"] for request in backup.requests] == ["spare"]
    assert served == [Served("spare", "openai")]
    assert failovers("server_error") == before + 1
    await router.aclose()


async def test_a_rate_limited_openai_endpoint_falls_back_to_anthropic(
    fake_openai: FakeOpenAI, fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_TEST_KEY", "sk-ant-from-env")
    fake_openai.script(rate_limited("0"))
    router = make_router(
        settings(
            fake_openai.base_url,
            fallbacks=[
                {
                    "provider": "anthropic",
                    "base_url": fake_anthropic.base_url,
                    "name": "claude-spare",
                    "api_key": "${ANTHROPIC_TEST_KEY}",
                }
            ],
        )
    )

    text, served = await answer(router, chat())

    assert text == "reply to: hi"
    assert len(fake_openai.requests) == 1
    assert [request.json["model"] for request in fake_anthropic.requests] == ["claude-spare"]
    assert anthropic_key(fake_anthropic.requests[0]) == "sk-ant-from-env"
    assert served == [Served("claude-spare", "anthropic")]
    await router.aclose()


async def test_a_rate_limited_anthropic_key_hands_over_to_the_next_key(fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.script(anthropic_rate_limited("20"))
    router = make_router(
        ModelSettings(
            provider="anthropic",
            base_url=fake_anthropic.base_url,
            name="claude-main",
            api_keys=["sk-ant-one", "sk-ant-two"],
        )
    )
    now = 10.0
    router._clock = lambda: now
    before = failovers("rate_limited")

    text, _ = await answer(router, replace(chat(), model="claude-main"))
    second, _ = await answer(router, replace(chat("again"), model="claude-main"))

    assert (text, second) == ("reply to: hi", "reply to: again")
    keys = [anthropic_key(request) for request in fake_anthropic.requests]
    assert keys == ["sk-ant-one", "sk-ant-two", "sk-ant-two"]  # the first rests its retry-after
    assert failovers("rate_limited") == before + 1
    await router.aclose()


def test_an_anthropic_endpoint_needs_a_key_and_no_base_url() -> None:
    with pytest.raises(ConfigError, match="no API key is set"):
        make_router(ModelSettings(provider="anthropic", name="claude-main"))
    with pytest.raises(ConfigError, match=r"model.fallbacks\[0\].base_url is needed"):
        make_router(settings("http://127.0.0.1:1/v1", fallbacks=[{"name": "spare"}]))

    router = make_router(ModelSettings(provider="anthropic", name="claude-main", api_key="sk-ant"))

    assert [target.label for target in router.targets_for("claude-main")] == ["api.anthropic.com"]


async def test_a_fallbacks_own_model_is_asked_its_window_at_the_fallbacks_endpoint(
    fake_openai: FakeOpenAI,
) -> None:
    async with SmallModelServer(2048) as small:
        router = make_router(
            settings(fake_openai.base_url, fallbacks=[{"base_url": small.base_url, "name": "small"}])
        )
        try:
            assert await router.discover_window("small") == 2048
            assert await router.discover_window("main-model") is None
        finally:
            await router.aclose()
