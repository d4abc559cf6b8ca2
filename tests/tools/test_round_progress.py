"""How the progress the calls of a round report becomes what their lines show."""

from __future__ import annotations

import asyncio

from bot.providers.base import ToolCall
from bot.tools.base import ToolProgress
from bot.turns.round_calls import RoundProgress

COPY = ToolCall("call-1", "files__copy", '{"path": "report.pdf"}')
FETCH = ToolCall("call-2", "web__fetch", '{"url": "https://example.org"}')


def test_a_report_reads_as_the_tools_words_or_how_far_it_is() -> None:
    assert ToolProgress(2, 4).text == "2/4"
    assert ToolProgress(0.5, 1).text == "0.5/1"
    assert ToolProgress(3).text == "3"
    assert ToolProgress(2, 4, "  copying\n page 2  ").text == "copying page 2"
    assert ToolProgress(1, None, "x" * 100).text == "x" * 47 + "…"


async def test_reports_between_two_takes_fold_into_the_newest_and_a_repeat_is_not_shown_again() -> None:
    progress = RoundProgress()
    copy, fetch = progress.reporter(COPY.id), progress.reporter(FETCH.id)
    copy(ToolProgress(1, 4))
    copy(ToolProgress(2, 4))
    fetch(ToolProgress(10, 100))

    assert progress.take([COPY, FETCH]) == [(COPY, "2/4"), (FETCH, "10/100")]
    copy(ToolProgress(2, 4))
    fetch(ToolProgress(20, 100))
    assert progress.take([COPY, FETCH]) == [(FETCH, "20/100")]


async def test_waiting_ends_when_a_call_reports_or_when_one_ends() -> None:
    progress = RoundProgress()
    release = asyncio.Event()
    running = {asyncio.create_task(release.wait())}

    progress.reporter(COPY.id)(ToolProgress(1, 2))
    ended, still = await asyncio.wait_for(progress.wait(running), 10)
    assert (ended, still) == (set(), running)
    assert progress.take([COPY]) == [(COPY, "1/2")]

    release.set()
    ended, still = await asyncio.wait_for(progress.wait(running), 10)
    assert (ended, still) == (running, set())
