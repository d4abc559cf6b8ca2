"""The turns running in this process, and how one is cut short (Stop, shutdown).

A turn's model stream is read through `RunningTurn.pump`: the stream runs in a
task of its own and hands pieces over a queue, so cutting a turn ends the wait
for the next piece at once — the turn then stores what arrived and says why it
ended, however long the model would still have taken.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Literal

CutReason = Literal["stop", "shutdown"]

_END = object()
_CUT = object()


class TurnCut(Exception):
    """The turn was cut short: by the person (`stop`) or by the process ending (`shutdown`)."""

    def __init__(self, reason: CutReason) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(eq=False)
class RunningTurn:
    session_id: str
    started: float = field(default_factory=time.monotonic)
    cut_reason: CutReason | None = None
    _queue: asyncio.Queue[object] | None = None
    _producer: asyncio.Task[None] | None = None

    def cut(self, reason: CutReason) -> None:
        if self.cut_reason is not None:
            return
        self.cut_reason = reason
        if self._producer is not None:
            self._producer.cancel()
        if self._queue is not None:
            self._queue.put_nowait(_CUT)

    async def pump(self, stream: AsyncIterator[str]) -> AsyncGenerator[str, None]:
        """The pieces of `stream`, until it ends, fails, or the turn is cut (`TurnCut`)."""
        if self.cut_reason is not None:
            raise TurnCut(self.cut_reason)
        queue: asyncio.Queue[object] = asyncio.Queue()

        async def produce() -> None:
            try:
                async with aclosing(stream) as pieces:  # type: ignore[type-var]
                    async for piece in pieces:
                        queue.put_nowait(piece)
                queue.put_nowait(_END)
            except Exception as error:
                queue.put_nowait(error)

        self._queue = queue
        self._producer = asyncio.create_task(produce())
        try:
            while True:
                item = await queue.get()
                if isinstance(item, str):
                    yield item
                elif item is _END:
                    return
                elif item is _CUT:
                    raise TurnCut(self.cut_reason or "stop")
                else:
                    assert isinstance(item, Exception)
                    raise item
        finally:
            producer, self._producer, self._queue = self._producer, None, None
            if producer is not None and not producer.done():
                producer.cancel()
                await asyncio.gather(producer, return_exceptions=True)


class InFlight:
    """Every model turn running in this process; `closing` once shutdown has begun."""

    def __init__(self) -> None:
        self._turns: set[RunningTurn] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.closing = False

    def __len__(self) -> int:
        return len(self._turns)

    def begin(self, session_id: str) -> RunningTurn:
        turn = RunningTurn(session_id)
        self._turns.add(turn)
        self._idle.clear()
        return turn

    def end(self, turn: RunningTurn) -> None:
        self._turns.discard(turn)
        if not self._turns:
            self._idle.set()

    def stop_session(self, session_id: str) -> bool:
        """Cut the running turn of this session; False when none runs here."""
        found = [turn for turn in self._turns if turn.session_id == session_id and turn.cut_reason is None]
        for turn in found:
            turn.cut("stop")
        return bool(found)

    def cut_all(self) -> int:
        """Cut every running turn (shutdown past its grace); returns how many."""
        running = [turn for turn in self._turns if turn.cut_reason is None]
        for turn in running:
            turn.cut("shutdown")
        return len(running)

    async def wait_idle(self, timeout: float) -> bool:
        """True when no turn runs any more, False when `timeout` passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True
