"""A per-visitor sliding-window rate limit, kept in memory (one process's view)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

WINDOW_SECONDS = 60.0
# How often (in checks) keys that went quiet are forgotten, so memory stays bounded.
SWEEP_EVERY = 1000


class RateLimiter:
    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self._hits: dict[str, deque[float]] = {}
        self._checks = 0

    def hit(self, key: str) -> float | None:
        """Count one request; None when allowed, else the seconds until the next is."""
        now = self.clock()
        self._checks += 1
        if self._checks % SWEEP_EVERY == 0:
            self._sweep(now)
        hits = self._hits.setdefault(key, deque())
        while hits and now - hits[0] >= WINDOW_SECONDS:
            hits.popleft()
        if len(hits) >= self.per_minute:
            return max(WINDOW_SECONDS - (now - hits[0]), 1.0)
        hits.append(now)
        return None

    def _sweep(self, now: float) -> None:
        quiet = [key for key, hits in self._hits.items() if not hits or now - hits[-1] >= WINDOW_SECONDS]
        for key in quiet:
            del self._hits[key]
