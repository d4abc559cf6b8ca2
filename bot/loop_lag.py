"""How long the event loop was blocked: the one number that says every lane stayed responsive.

A probe wakes every `interval` seconds and records how late it woke; lateness is
time the loop spent running something that did not yield (CPU work, a blocking
database call). `chorus serve` runs one for its lifetime and logs the summary
when it stops, so a benchmark (or an operator) can read p99 and the longest stall.
"""

from __future__ import annotations

import asyncio
import time

INTERVAL = 0.01


class LoopLagProbe:
    def __init__(self, interval: float = INTERVAL) -> None:
        self.interval = interval
        self.stalls: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._started = 0.0

    def start(self) -> None:
        self._started = time.perf_counter()
        self._task = asyncio.create_task(self._run(), name="loop-lag-probe")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def summary(self) -> str:
        """'event loop stalls: p99 X ms, max Y ms over N samples in S s'."""
        if not self.stalls:
            return "event loop stalls: no samples"
        ordered = sorted(self.stalls)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return (
            f"event loop stalls: p99 {p99 * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms "
            f"over {len(ordered)} samples in {time.perf_counter() - self._started:.0f} s"
        )

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(self.interval)
            self.stalls.append(max(0.0, time.perf_counter() - before - self.interval))
