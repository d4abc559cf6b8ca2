"""`Backoff`: how long a lane waits before it connects again after its connection failed.

Exponential from `first` up to `ceiling`, with the same jitter as the model providers'
retries (`bot.backoff.backoff_delay`), so lanes of many processes that
failed together do not come back in lockstep. A connection that stayed up for
`healthy_after` seconds starts the next round of waits from `first` again.
"""

from __future__ import annotations

import time

from bot.backoff import backoff_delay

HEALTHY_AFTER = 60.0


class Backoff:
    def __init__(self, first: float, ceiling: float, *, healthy_after: float = HEALTHY_AFTER) -> None:
        self.first = first
        self.ceiling = ceiling
        self.healthy_after = healthy_after
        self._attempt = 0
        self._connected_at: float | None = None

    def connected(self) -> None:
        """The connection is up (Discord's READY, a getUpdates answer)."""
        if self._connected_at is None:
            self._connected_at = time.monotonic()

    def next(self) -> float:
        """The connection failed: seconds to wait before the next attempt."""
        if self._connected_at is not None and time.monotonic() - self._connected_at >= self.healthy_after:
            self._attempt = 0
        self._connected_at = None
        delay = backoff_delay(self._attempt, None, base=self.first, ceiling=self.ceiling)
        self._attempt += 1
        return delay
