"""The throttled draft Discord replies stream into: a held-back progress line still shows."""

from __future__ import annotations

import asyncio

from channels.drafts import DraftStreamer, EditedDraft

INTERVAL = 0.3


class Messages:
    """Where a draft goes: every text each message showed."""

    def __init__(self) -> None:
        self.shown: list[list[str]] = []

    async def send(self, text: str) -> int:
        self.shown.append([text])
        return len(self.shown) - 1

    async def edit(self, handle: int, text: str, final: bool) -> None:
        self.shown[handle].append(text)


def stream(messages: Messages) -> tuple[DraftStreamer[str], EditedDraft[str, int]]:
    draft: EditedDraft[str, int] = EditedDraft(send=messages.send, edit=messages.edit)
    streamer = DraftStreamer(
        draft,
        render=lambda text, speaker, cursor: text + cursor,
        interval=INTERVAL,
        first_wait=0.0,
        ready=lambda text: True,
    )
    return streamer, draft


async def shows(messages: Messages, text: str) -> None:
    async with asyncio.timeout(30):
        while not messages.shown or messages.shown[0][-1] != text:
            await asyncio.sleep(0.02)


async def test_a_progress_line_the_interval_holds_back_is_shown_once_it_may_be() -> None:
    messages = Messages()
    drafts, draft = stream(messages)
    drafts.update("Let me check.")
    await shows(messages, "Let me check. ▌")

    drafts.update("🔧 lookup: dentist", whole=True)
    await asyncio.sleep(0)

    assert messages.shown == [["Let me check. ▌"]]
    await shows(messages, "🔧 lookup: dentist ▌")
    await drafts.close()
    await draft.finish(["Tuesday."])
    assert messages.shown == [["Let me check. ▌", "🔧 lookup: dentist ▌", "Tuesday."]]


async def test_the_answer_arriving_first_drops_a_held_back_progress_line() -> None:
    messages = Messages()
    drafts, draft = stream(messages)
    drafts.update("Let me check.")
    await shows(messages, "Let me check. ▌")
    drafts.update("🔧 lookup: dentist", whole=True)

    await drafts.close()
    await draft.finish(["Tuesday."])

    assert messages.shown == [["Let me check. ▌", "Tuesday."]]
