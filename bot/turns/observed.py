"""A turn's events passed through unchanged, timed and counted in `bot.metrics`."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing

from bot.metrics import ACTIVE_STREAMS, TIME_TO_FIRST_TOKEN, TURN_DURATION, TURNS
from bot.turns.events import Delta, Reply, TurnEvent

# The one line per turn keeps the logger name operators filter on.
log = logging.getLogger("bot.metrics")


def turn_outcome(reply: Reply) -> str:
    if reply.kind == "assistant":
        return reply.status
    return reply.kind


async def observe_turn(events: AsyncIterator[TurnEvent], lane: str) -> AsyncGenerator[TurnEvent, None]:
    """Passes a turn's events through, timing it, counting its outcome and logging one line."""
    started = time.perf_counter()
    first_text = False
    outcome = "abandoned"  # the lane stopped listening before the final reply
    ACTIVE_STREAMS.labels(lane).inc()
    try:
        async with aclosing(events) as stream:  # type: ignore[type-var]
            async for event in stream:
                if isinstance(event, Delta) and not first_text:
                    first_text = True
                    TIME_TO_FIRST_TOKEN.labels(lane).observe(time.perf_counter() - started)
                elif isinstance(event, Reply):
                    outcome = turn_outcome(event)
                yield event
    finally:
        duration = time.perf_counter() - started
        ACTIVE_STREAMS.labels(lane).dec()
        TURN_DURATION.labels(lane).observe(duration)
        TURNS.labels(lane, outcome).inc()
        # One line per turn for log shippers; the ids come from the turn's log scope.
        log.info("turn %s in %.3f s", outcome, duration)
