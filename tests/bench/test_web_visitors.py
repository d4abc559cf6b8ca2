"""The web benchmark's event-loop lag window: p99 and longest from two scrapes of the histogram."""

from __future__ import annotations

import math

from bench.web_visitors import lag_window

BOUNDS = (0.005, 0.01, 0.05, 0.1, math.inf)


def scrape(*cumulative: float) -> list[tuple[float, float]]:
    return list(zip(BOUNDS, cumulative, strict=True))


def test_only_the_samples_between_the_scrapes_count() -> None:
    # Before: a 0.1 s stall at start-up. Between: 197 samples under 5 ms, one under 10, two under 50.
    before = scrape(10, 10, 10, 11, 11)
    after = scrape(207, 208, 210, 211, 211)
    assert lag_window(before, after) == (10.0, 50.0)


def test_no_samples_in_the_window_is_not_a_number() -> None:
    same = scrape(5, 5, 5, 5, 5)
    p99, longest = lag_window(same, same)
    assert math.isnan(p99) and math.isnan(longest)
