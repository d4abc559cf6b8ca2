"""Stopping a running reply: the person asked for it (`/stop`, a Stop button), or
the process is shutting down and the reply outlived its grace period.

The model's stream is read in a task of its own, so a stop request can end it
at once — even while the turn waits for the next piece — without cancelling
the task of the lane that is playing the reply back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

# Why a turn ended early: the person stopped it, or the process was shutting down.
StopReason = Literal["stop", "shutdown"]
Item = TypeVar("Item")


@dataclass
class _End:
    """The stream is over: finished, stopped, or failed with `error`."""

    error: BaseException | None = None


@dataclass
class RunningTurn:
    """The handle a stop request reaches: one per running turn."""

    stopped: bool = False
    reason: StopReason = "stop"
    _reader: asyncio.Task[None] | None = field(default=None, repr=False)
    # Tool calls running for the turn: a stop cancels them too.
    _tools: set[asyncio.Task[Any]] = field(default_factory=set, repr=False)

    def stop(self, reason: StopReason = "stop") -> None:
        self.stopped = True
        self.reason = reason
        if self._reader is not None:
            self._reader.cancel()
        for task in self._tools:
            task.cancel()

    def track(self, task: asyncio.Task[Any]) -> None:
        """Cancel `task` (a running tool call) when the turn is stopped."""
        if self.stopped:
            task.cancel()
            return
        self._tools.add(task)
        task.add_done_callback(self._tools.discard)

    async def pieces(self, stream: AsyncGenerator[Item, None]) -> AsyncGenerator[Item, None]:
        """The stream's pieces until it ends or `stop()` is called; its errors are re-raised here."""
        if self.stopped:
            await stream.aclose()
            return
        queue: asyncio.Queue[Item | _End] = asyncio.Queue()
        self._reader = asyncio.create_task(_read(stream, queue))
        try:
            while not isinstance(item := await queue.get(), _End):
                yield item
            if item.error is not None:
                raise item.error
        finally:
            reader, self._reader = self._reader, None
            if not reader.done():
                # The consumer went away (a lane stopped listening): close the model stream now.
                reader.cancel()
                with suppress(asyncio.CancelledError):
                    await reader


async def _read(stream: AsyncGenerator[Item, None], queue: asyncio.Queue[Item | _End]) -> None:
    try:
        async with aclosing(stream) as pieces:
            async for piece in pieces:
                queue.put_nowait(piece)
    except asyncio.CancelledError:
        queue.put_nowait(_End())
    except Exception as error:
        queue.put_nowait(_End(error))
    else:
        queue.put_nowait(_End())


class RunningTurns:
    """The turns running in this process, by session id (the turn lock allows one per session).

    `closing` is set when shutdown begins (no new turns); after `cut_all` every turn,
    including one that only gets its session's lock later, ends at once.
    """

    def __init__(self) -> None:
        self._turns: dict[str, RunningTurn] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self.closing = False
        self._cutting = False

    def __len__(self) -> int:
        return len(self._turns)

    def begin(self, session_id: str) -> RunningTurn:
        turn = RunningTurn()
        if self._cutting:
            turn.stop("shutdown")
        self._turns[session_id] = turn
        self._idle.clear()
        return turn

    def end(self, session_id: str, turn: RunningTurn) -> None:
        if self._turns.get(session_id) is turn:
            del self._turns[session_id]
        if not self._turns:
            self._idle.set()

    def stop(self, session_id: str) -> bool:
        turn = self._turns.get(session_id)
        if turn is None or turn.stopped:
            return False
        turn.stop()
        return True

    def cut_all(self) -> int:
        """Stop every running turn for shutdown; returns how many were running."""
        self._cutting = True
        running = [turn for turn in self._turns.values() if not turn.stopped]
        for turn in running:
            turn.stop("shutdown")
        return len(running)

    async def wait_idle(self, timeout: float) -> bool:
        """True once no turn runs, False when `timeout` passed first."""
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True
