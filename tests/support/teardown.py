"""Teardown that fails loudly instead of hanging the suite."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

# Generous for a loaded 2-core machine; a stop that takes longer is stuck, and a
# named failure beats a suite that never ends.
TEARDOWN_DEADLINE = 120.0


async def within_deadline(step: Awaitable[None], what: str) -> None:
    try:
        async with asyncio.timeout(TEARDOWN_DEADLINE):
            await step
    except TimeoutError:
        raise AssertionError(f"{what} did not finish within {TEARDOWN_DEADLINE:.0f} s") from None
