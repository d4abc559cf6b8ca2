"""What the running calls of a tool round report about their progress, for the lanes' progress lines.

A tool that can tell how far it is (an MCP server sending `notifications/progress`)
reports it through its `ToolContext`; the engine shows the newest report of each call
as a `ToolStep`. Reports that come faster than the engine shows them are folded into
the newest, and every lane throttles its own edits on top of that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TypeVar

from bot.providers.base import ToolCall
from bot.tools.base import ReportProgress, ToolProgress

Result = TypeVar("Result")


class RoundProgress:
    """The newest progress of each call of one round that has reported some since it was last taken."""

    def __init__(self) -> None:
        self._newest: dict[str, str] = {}
        # What each call's line shows already: a report that says the same again changes nothing.
        self._shown: dict[str, str] = {}
        # Calls that now wait for a person's yes or no, with the approval that asks it.
        self._asked: dict[str, int] = {}
        self._reported = asyncio.Event()

    def reporter(self, call_id: str) -> ReportProgress:
        """Where the call `call_id` reports its progress."""

        def report(progress: ToolProgress) -> None:
            self._newest[call_id] = progress.text
            self._reported.set()

        return report

    def ask(self, call_id: str, approval_id: int) -> None:
        """The call `call_id` waits for an answer to approval `approval_id`: the lane shows the question."""
        self._asked[call_id] = approval_id
        self._reported.set()

    def take_asked(self, running: Iterable[ToolCall]) -> list[tuple[ToolCall, int]]:
        """Those of the `running` calls that began waiting for approval since the last take."""
        asked, self._asked = self._asked, {}
        return [(call, asked[call.id]) for call in running if call.id in asked]

    def take(self, running: Iterable[ToolCall]) -> list[tuple[ToolCall, str]]:
        """Those of the `running` calls whose progress changed since the last take, with their
        newest progress text; a call that has ended shows its end rather than its progress."""
        newest, self._newest = self._newest, {}
        self._reported.clear()
        taken: list[tuple[ToolCall, str]] = []
        for call in running:
            text = newest.get(call.id)
            if text is not None and text != self._shown.get(call.id):
                self._shown[call.id] = text
                taken.append((call, text))
        return taken

    async def wait(
        self, running: set[asyncio.Task[Result]]
    ) -> tuple[set[asyncio.Task[Result]], set[asyncio.Task[Result]]]:
        """Until one of `running` ends or a call reports progress: (the ended, the still running)."""
        reported = asyncio.ensure_future(self._reported.wait())
        try:
            await asyncio.wait({*running, reported}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            reported.cancel()
        ended = {task for task in running if task.done()}
        return ended, running - ended
