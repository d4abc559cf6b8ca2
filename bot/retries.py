"""One retry loop for every HTTP client Chorus runs: the model providers and the speech service.

Each client keeps only its parsing: an attempt raises `RetryableFailure` for what another
attempt may fix (a dropped connection, 429, 5xx) and a public error for the rest. The loop
waits as the policy says (the server's `Retry-After` first, else exponential backoff),
counts each retry by whether the server was busy or unreachable (in the policy's counter),
and turns the last failure into the client's own error once the attempts run out. A stream
that already showed the person something is never asked again: the client says how it broke
off instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client import Counter

from bot.backoff import backoff_delay
from bot.errors import ChorusError, RetryableFailure

T = TypeVar("T")
# The error a client raises for a failure that stays after the last attempt, or mid-stream.
FailureError = Callable[[RetryableFailure], ChorusError]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a client asks again."""

    max_retries: int = 3
    backoff_base: float = 0.5
    max_backoff: float = 30.0
    # Counts each retry by reason ("busy": 408/429/5xx, "unreachable"), when given.
    retries: Counter | None = None

    def delay(self, attempt: int, retry_after: float | None) -> float:
        return backoff_delay(attempt, retry_after, base=self.backoff_base, ceiling=self.max_backoff)


async def _wait_before_retry(policy: RetryPolicy, attempt: int, failure: RetryableFailure) -> None:
    if policy.retries is not None:
        policy.retries.labels("busy" if failure.busy else "unreachable").inc()
    await asyncio.sleep(policy.delay(attempt, failure.retry_after))


async def retrying(policy: RetryPolicy, attempt: Callable[[], Awaitable[T]], *, exhausted: FailureError) -> T:
    """`attempt()`'s result, asked again on a `RetryableFailure` until the policy gives up."""
    number = 0
    while True:
        try:
            return await attempt()
        except RetryableFailure as failure:
            if number == policy.max_retries:
                raise exhausted(failure) from failure
            await _wait_before_retry(policy, number, failure)
            number += 1


async def retrying_stream(
    policy: RetryPolicy,
    attempt: Callable[[], AsyncGenerator[T, None]],
    *,
    started: Callable[[], bool],
    interrupted: FailureError,
    exhausted: FailureError,
) -> AsyncGenerator[T, None]:
    """`attempt()`'s items, the stream asked again on a `RetryableFailure` before `started()`."""
    number = 0
    while True:
        try:
            async with aclosing(attempt()) as items:
                async for item in items:
                    yield item
            return
        except RetryableFailure as failure:
            if started():
                raise interrupted(failure) from failure
            if number == policy.max_retries:
                raise exhausted(failure) from failure
            await _wait_before_retry(policy, number, failure)
            number += 1
