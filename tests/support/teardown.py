"""Teardown that fails loudly instead of hanging the suite."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

# Generous for a loaded 2-core machine; a stop that takes longer is stuck, and a
# named failure beats a suite that never ends.
TEARDOWN_DEADLINE = 120.0
# How often a leftover pool task is cancelled again: it ignores a cancel that lands
# while it runs pool maintenance (connecting, say), and hears one only while idle.
POOL_TASK_CANCELS = 20


async def within_deadline(step: Awaitable[None], what: str) -> None:
    try:
        async with asyncio.timeout(TEARDOWN_DEADLINE):
            await step
    except TimeoutError:
        raise AssertionError(f"{what} did not finish within {TEARDOWN_DEADLINE:.0f} s") from None


def pool_tasks() -> set[asyncio.Task[object]]:
    """Tasks of psycopg connection pools still running in this event loop."""
    return {task for task in asyncio.all_tasks() if not task.done() and _runs_pool_code(task)}


async def no_pool_tasks_left(what: str) -> None:
    """Fail if pool tasks outlive `what`, ending them first.

    psycopg_pool's workers catch CancelledError, so a pool that was never closed can
    keep the event loop from ever finishing: left alone, the test would hang at
    the end instead of failing here.
    """
    left = pool_tasks()
    if not left:
        return
    _, left = await asyncio.wait(left, timeout=TEARDOWN_DEADLINE)
    if not left:
        return
    names = sorted(task.get_name() for task in left)
    for _ in range(POOL_TASK_CANCELS):
        for task in left:
            task.cancel()
        _, left = await asyncio.wait(left, timeout=1.0)
        if not left:
            break
    raise AssertionError(
        f"database pool tasks {names} still ran {TEARDOWN_DEADLINE:.0f} s after {what}: "
        "a pool was never closed"
    )


def _runs_pool_code(task: asyncio.Task[object]) -> bool:
    frame = getattr(task.get_coro(), "cr_frame", None)
    return frame is not None and str(frame.f_globals.get("__name__", "")).startswith("psycopg_pool")
