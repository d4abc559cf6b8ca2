"""Records never overlap, even when two workers plan the same step; one job per session."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.storage.context_records import ContextRecords
from tests.context.helpers import runtime, say, session_of
from tests.fakes.openai_server import FakeOpenAI, Reply


async def test_overlapping_records_are_refused(runtimes, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    rt = runtime(runtimes, tmp_path, fake_openai)
    records = ContextRecords(rt.database)
    assert records.add_collapse("s1", 1, 4, "a") is not None
    assert records.add_collapse("s1", 3, 6, "b") is None  # overlaps #3–#4
    assert records.add_collapse("s1", 1, 2, "c") is None  # same first_seq
    assert records.add_collapse("s1", 5, 8, "d") is not None
    assert records.add_collapse("s2", 1, 4, "other session") is not None
    assert records.add_summary("s1", 1, 10, "one") is not None
    assert records.add_summary("s1", 1, 12, "same base, lost the race") is None
    assert records.add_summary("s1", 11, 20, "two") is not None
    assert records.latest_summary("s1").text == "two"  # type: ignore[union-attr]
    assert [(c.first_seq, c.last_seq) for c in records.collapses("s1", after_seq=0)] == [(1, 4), (5, 8)]
    assert records.collapses("s1", after_seq=4) == [records.collapses("s1")[1]]


async def test_one_background_job_per_session(runtimes, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    rt = runtime(runtimes, tmp_path, fake_openai, context_compact_dropped_messages=1000)
    for n in range(12):
        await say(rt, f"m{n}")
    assert rt.context is not None
    session = session_of(rt)
    rt.settings.context.compact_dropped_messages = 2
    fake_openai.script(Reply("slow summary", delay=0.05))
    # The second job finds the first running for this session and leaves the work to it.
    await asyncio.gather(rt.context.after_turn(session), rt.context.after_turn(session))
    assert len([r for r in fake_openai.requests if r.is_summary]) == 1
    assert rt.context.counters.compactions == 1
    summary = rt.context.records.latest_summary(session.id)
    assert summary is not None and (summary.last_seq, summary.text) == (4, "slow summary")
