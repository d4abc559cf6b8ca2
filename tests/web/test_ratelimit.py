from __future__ import annotations

from channels.web.ratelimit import RateLimiter


def test_sliding_window_allows_the_limit_then_says_how_long_to_wait() -> None:
    now = [1000.0]
    limiter = RateLimiter(3, clock=lambda: now[0])
    assert [limiter.hit("a") for _ in range(3)] == [None, None, None]
    now[0] += 20
    assert limiter.hit("a") == 40.0
    assert limiter.hit("b") is None
    now[0] += 40
    assert limiter.hit("a") is None
