"""`backoff_delay`: the one exponential backoff with jitter that Chorus retries with.

Model providers and speech retry requests with it (`bot.retries`), lanes reconnect with it
(`channels.reconnect`).
"""

from __future__ import annotations

import random


def backoff_delay(attempt: int, retry_after: float | None, *, base: float, ceiling: float) -> float:
    """Seconds before attempt `attempt + 1`: the server's `Retry-After`, else exponential backoff."""
    if retry_after is not None:
        return min(retry_after, ceiling)
    # Jitter keeps many sessions that failed together from retrying in lockstep.
    return min(base * 2.0**attempt * random.uniform(1.0, 1.1), ceiling)
