"""Records never overlap, even when two workers plan the same step; one job per session."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.storage import context_records, migrate
from bot.storage.context_records import ContextRecords
from bot.storage.database import create_database_engine
from bot.storage.messages import MessageStore
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
    rt = runtime(
        runtimes, tmp_path, fake_openai, context_compact_dropped_messages=1000, context_window="rolling"
    )
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


def test_a_view_reads_the_newest_summary_and_the_collapses_after_it(tmp_path: Path) -> None:
    engine = create_database_engine(f"sqlite:///{tmp_path / 'records.db'}")
    migrate.upgrade(engine)
    records, messages = ContextRecords(engine), MessageStore(engine)
    records.add_collapse("s1", 2, 3, "before the summary")
    for first in range(1, 40, 4):
        records.add_summary("s1", first, first + 3, f"up to #{first + 3}")
    records.add_collapse("s1", 41, 44, "after the summary")
    records.add_summary("s2", 1, 90, "another session's")
    view = records.view(messages, "s1", 10)
    assert (view.summary_text, view.summary_last_seq) == ("up to #40", 40)
    assert [(c.first_seq, c.last_seq, c.summary) for c in view.collapses] == [(41, 44, "after the summary")]
    assert records.latest_summary_seq("s1") == 40
    engine.dispose()


@pytest.mark.parametrize(
    ("statement", "index"),
    [
        ("LATEST_SUMMARY", "ix_context_records_latest"),
        ("LATEST_SUMMARY_SEQ", "ix_context_records_latest"),
        ("COLLAPSES_AFTER", "sqlite_autoindex_context_records_1"),  # (session, kind, first_seq)
    ],
)
def test_the_records_of_every_model_call_are_found_in_an_index_not_by_reading_the_session(
    tmp_path: Path, statement: str, index: str
) -> None:
    # A long conversation has thousands of summaries; a model call must not read them all.
    engine = create_database_engine(f"sqlite:///{tmp_path / 'plan.db'}")
    migrate.upgrade(engine)
    compiled = getattr(context_records, statement).compile(engine)
    values = compiled.construct_params({"session_id": "s1", "after": 0})
    with engine.connect() as connection:
        raw = connection.connection.driver_connection
        plan = [
            str(row[3])
            for row in raw.execute(
                f"EXPLAIN QUERY PLAN {compiled}", [values[name] for name in compiled.positiontup]
            )
        ]
    reads = [step for step in plan if "context_records" in step]
    assert reads and all(step.startswith("SEARCH") and index in step for step in reads), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan  # no sort of what was found
    engine.dispose()
