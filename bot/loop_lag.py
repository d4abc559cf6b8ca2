"""How long the event loop was blocked: the one number that says every lane stayed responsive.

A probe wakes every `interval` seconds and records how late it woke; lateness is
time the loop spent running something that did not yield (CPU work, a blocking
database call). `chorus serve` runs one for its lifetime: every sample goes into
the `chorus_event_loop_lag_seconds` histogram of `/metrics` (a benchmark reads a
window of it), a stall of `REPORT_SECONDS` or more is logged as it happens, and the
summary (p99, longest stall) is logged when the process stops.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter

from bot.metrics import LOOP_LAG

log = logging.getLogger(__name__)

INTERVAL = 0.01
# A stall this long is logged on its own line (the loop was unresponsive for every lane).
REPORT_SECONDS = 0.25


class LoopLagProbe:
    def __init__(self, interval: float = INTERVAL) -> None:
        self.interval = interval
        # Samples by whole milliseconds: memory stays bounded however long the process runs.
        self.stalls: Counter[int] = Counter()
        self._timer: asyncio.TimerHandle | None = None
        self._started = 0.0

    def start(self) -> None:
        self._started = time.perf_counter()
        self._schedule(asyncio.get_running_loop())

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def record(self, stall: float) -> None:
        self.stalls[round(stall * 1000)] += 1
        LOOP_LAG.observe(stall)
        if stall >= REPORT_SECONDS:
            log.warning("event loop stalled for %.0f ms", stall * 1000)

    def summary(self) -> str:
        """'event loop stalls: p99 X ms, max Y ms over N samples in S s'."""
        samples = self.stalls.total()
        if not samples:
            return "event loop stalls: no samples"
        ordered = sorted(self.stalls.items())
        rank = min(samples - 1, int(samples * 0.99))
        seen = 0
        p99 = ordered[-1][0]
        for milliseconds, count in ordered:
            seen += count
            if seen > rank:
                p99 = milliseconds
                break
        return (
            f"event loop stalls: p99 {p99:.1f} ms, max {ordered[-1][0]:.1f} ms "
            f"over {samples} samples in {time.perf_counter() - self._started:.0f} s"
        )

    # A timer callback, not a task that sleeps: the probe runs 100 times a second for the
    # process's life, and a task's wake-up (future, task step) cost about twice the callback's.
    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        due = loop.time() + self.interval
        self._timer = loop.call_at(due, self._tick, loop, due)

    def _tick(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        self.record(max(0.0, loop.time() - due))
        self._schedule(loop)
