"""The one retry loop the model providers and the speech service share (bot/retries.py)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest
from prometheus_client import CollectorRegistry, Counter

from bot.errors import ChorusError, RetryableFailure
from bot.retries import RetryPolicy, retrying, retrying_stream

FAST = RetryPolicy(max_retries=2, backoff_base=0.0, max_backoff=0.0)


class GaveUp(ChorusError):
    pass


class BrokeOff(ChorusError):
    pass


def _counted() -> tuple[RetryPolicy, CollectorRegistry]:
    registry = CollectorRegistry()
    counter = Counter("retries", "retries by reason", ["reason"], registry=registry)
    return RetryPolicy(max_retries=2, backoff_base=0.0, max_backoff=0.0, retries=counter), registry


async def test_a_call_is_asked_again_until_it_answers_and_each_retry_is_counted_by_reason() -> None:
    policy, registry = _counted()
    failures = [RetryableFailure("HTTP 503", busy=True), RetryableFailure("could not connect", busy=False)]

    async def attempt() -> str:
        if failures:
            raise failures.pop(0)
        return "answer"

    assert await retrying(policy, attempt, exhausted=GaveUp) == "answer"
    assert registry.get_sample_value("retries_total", {"reason": "busy"}) == 1
    assert registry.get_sample_value("retries_total", {"reason": "unreachable"}) == 1


async def test_the_last_failure_becomes_the_clients_own_error() -> None:
    attempts = 0

    async def attempt() -> str:
        nonlocal attempts
        attempts += 1
        raise RetryableFailure("HTTP 502", busy=True)

    with pytest.raises(GaveUp, match="HTTP 502"):
        await retrying(FAST, attempt, exhausted=lambda failure: GaveUp(failure.reason))
    assert attempts == FAST.max_retries + 1


async def test_a_stream_that_failed_before_showing_anything_is_asked_again() -> None:
    shown: list[str] = []
    attempts = 0

    def attempt() -> AsyncGenerator[str, None]:
        async def stream() -> AsyncGenerator[str, None]:
            nonlocal attempts
            attempts += 1
            if attempts == 1:
                raise RetryableFailure("the connection dropped", busy=False)
            for piece in ("he", "llo"):
                shown.append(piece)
                yield piece

        return stream()

    items = [
        item
        async for item in retrying_stream(
            FAST, attempt, started=lambda: bool(shown), interrupted=BrokeOff, exhausted=GaveUp
        )
    ]
    assert items == ["he", "llo"] and attempts == 2


async def test_a_stream_that_broke_off_after_showing_text_is_not_asked_again() -> None:
    shown: list[str] = []
    attempts = 0

    def attempt() -> AsyncGenerator[str, None]:
        async def stream() -> AsyncGenerator[str, None]:
            nonlocal attempts
            attempts += 1
            shown.append("he")
            yield "he"
            raise RetryableFailure("the connection dropped", busy=False)

        return stream()

    with pytest.raises(BrokeOff):
        async for _ in retrying_stream(
            FAST, attempt, started=lambda: bool(shown), interrupted=BrokeOff, exhausted=GaveUp
        ):
            pass
    assert attempts == 1
