"""The throttled draft Discord replies stream into: a held-back progress line still shows."""

from __future__ import annotations

import asyncio

from channels.drafts import DraftStream

INTERVAL = 0.3


class Messages:
    """Where a draft goes: every text each message showed."""

    def __init__(self) -> None:
        self.shown: list[list[str]] = []

    async def send(self, text: str) -> int:
        self.shown.append([text])
        return len(self.shown) - 1

    async def edit(self, handle: int, text: str) -> None:
        self.shown[handle].append(text)


def stream(messages: Messages) -> DraftStream[int]:
    return DraftStream(send=messages.send, edit=messages.edit, limit=2000, interval=INTERVAL)


async def test_a_progress_line_the_interval_holds_back_is_shown_once_it_may_be() -> None:
    messages = Messages()
    drafts = stream(messages)
    await drafts.update("Let me check.")

    await drafts.update("🔧 lookup: dentist", whole=True)

    assert messages.shown == [["Let me check. ▌"]]
    async with asyncio.timeout(30):
        while messages.shown[0][-1] != "🔧 lookup: dentist ▌":
            await asyncio.sleep(0.02)
    await drafts.finish("Tuesday.")
    assert messages.shown == [["Let me check. ▌", "🔧 lookup: dentist ▌", "Tuesday."]]


async def test_the_answer_arriving_first_drops_a_held_back_progress_line() -> None:
    messages = Messages()
    drafts = stream(messages)
    await drafts.update("Let me check.")
    await drafts.update("🔧 lookup: dentist", whole=True)

    await drafts.finish("Tuesday.")

    assert messages.shown == [["Let me check. ▌", "Tuesday."]]
