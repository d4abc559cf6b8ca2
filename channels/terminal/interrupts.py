"""Ctrl-C in `chorus chat`: while a handler is installed, SIGINT calls it on the event loop.

Outside `handled` the process's own handling stays (asyncio's: the chat ends), so Ctrl-C
ends a chat fed by a pipe as it ends any command. The handler runs on the loop's thread,
called soon after the signal, so it may touch the turn and the screen freely.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def handled(handler: Callable[[], None]) -> Iterator[None]:
    """SIGINT runs `handler` on the running loop until the block ends."""
    loop = asyncio.get_running_loop()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(handler)

    try:
        previous = signal.signal(signal.SIGINT, on_signal)
    except ValueError:
        # Not the main thread (a chat run inside another program): there is no Ctrl-C to handle.
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
