"""A reply enqueues only the after-turn jobs that have work, and the jobs store the same.

Context maintenance and the memory offload say when they have work (`has_work`); a turn
checks that against the state its reply leaves, and a recorded group message against the
state it leaves. The same conversation run with every job enqueued after every turn and
every recorded message (as before the check) must leave the same summaries, collapses and
memory cursor after each of them, while the checked run runs the jobs far less often.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.jobs import FLUSH_IDLE_MEMORY, MAINTAIN_CONTEXT, OFFLOAD_MEMORY
from bot.providers.after_turn import PrefixOnce
from bot.runtime import Runtime
from bot.storage.jobs import JobSpec
from bot.storage.models import ChatSession
from bot.turns.after_turn import AfterTurn
from tests.support.runtime import RuntimeFactory, inbound

# Short and long messages, so the offload's character trigger and the context's share
# trigger both fire now and then, besides the turn count and the dropped messages.
SAID = [
    "We moved the launch to Friday.",
    "Remember that the staging database is read-only on weekends. " * 6,
    "Ok.",
    "Who owns the release notes this time? Dana said she would, but she is away next week.",
    "The budget for the trip is 1,200 euros, flights included.",
    "Thanks!",
]
BASE = {
    "memory_turns_threshold": 3,
    "memory_chars_threshold": 700,
    "memory_idle_seconds": 0,
    "context_compact_dropped_messages": 3,
}
# A roomy window: messages leave it by count, and summaries take them in.
ROOMY = {**BASE, "model_context_window": 128_000}
# A tight one: the context passes the collapse share, then the compaction share.
TIGHT = {**BASE, "model_context_window": 3000, "context_collapse_share": 0.65, "context_compact_share": 0.8}
TURNS = 30
# A group chat the bot mostly listens to: every fifth message is addressed to it.
GROUP = {"chat_id": "team", "chat_kind": "group"}
GROUP_MESSAGES = 40
ADDRESSED_EVERY = 5


class EveryJob:
    """Every after-turn job after every turn, whether it has work or not."""

    def __init__(self, specs: tuple[JobSpec, ...]) -> None:
        self.after_turn = specs

    def with_work(self, turn: AfterTurn) -> tuple[JobSpec, ...]:
        return self.after_turn


def counting_runs(runtime: Runtime) -> Counter[str]:
    """Counts the runs of the two jobs that may have no work, by wrapping what they call."""
    runs: Counter[str] = Counter()
    maintain, offload = runtime.context.after_turn, runtime.memory.offload_due

    async def maintain_counted(session: ChatSession) -> None:
        runs[MAINTAIN_CONTEXT] += 1
        await maintain(session)

    async def offload_counted(session: ChatSession, prefix: PrefixOnce | None = None) -> None:
        runs[OFFLOAD_MEMORY] += 1
        await offload(session, prefix)

    runtime.context.after_turn = maintain_counted  # type: ignore[method-assign]
    runtime.memory.offload_due = offload_counted  # type: ignore[method-assign]
    return runs


def checked_and_every_job(
    runtimes: RuntimeFactory, tmp_path: Path, settings: dict[str, object]
) -> tuple[tuple[Runtime, Counter[str]], tuple[Runtime, Counter[str]]]:
    """Two runtimes, and their job runs: one checks for work, the other enqueues every job."""
    checked = runtimes(tmp_path / "checked", **settings)
    every = runtimes(tmp_path / "every", **settings)
    every.engine.recorder.after_turn = EveryJob(every.engine.recorder.after_turn.after_turn)
    return (checked, counting_runs(checked)), (every, counting_runs(every))


def stored_state(runtime: Runtime) -> tuple[list[tuple[str, int, int]], int | None, int]:
    """The context records' ranges, the memory cursor, and how many memory items there are."""
    with runtime.database.connect() as connection:
        records = connection.execute(
            text("SELECT kind, first_seq, last_seq FROM context_records ORDER BY id")
        ).all()
        cursor = connection.execute(text("SELECT last_seq FROM memory_cursors")).scalar()
        items = connection.execute(text("SELECT count(*) FROM memory_items")).scalar_one()
    return [tuple(record) for record in records], cursor, int(items)


async def conversation(runtime: Runtime) -> list[tuple[list[tuple[str, int, int]], int | None, int]]:
    states = []
    for turn in range(TURNS):
        reply = await runtime.engine.respond(inbound(SAID[turn % len(SAID)], message_id=str(turn)))
        assert reply.kind == "assistant"
        await runtime.engine.drain()
        states.append(stored_state(runtime))
    return states


@pytest.mark.parametrize(
    ("settings", "records_made", "maintenance_runs"),
    # Past the collapse share, every turn's context has work for maintenance.
    [(ROOMY, {"summary"}, TURNS // 2), (TIGHT, {"summary", "collapse"}, TURNS)],
    ids=["roomy", "tight"],
)
async def test_jobs_enqueued_only_with_work_store_what_every_job_every_turn_stores(
    runtimes: RuntimeFactory,
    tmp_path: Path,
    settings: dict[str, object],
    records_made: set[str],
    maintenance_runs: int,
) -> None:
    (checked, checked_runs), (every, every_runs) = checked_and_every_job(runtimes, tmp_path, settings)

    checked_states = await conversation(checked)
    assert checked_states == await conversation(every)
    # The conversation reached the triggers: records were stored, and memory offloaded.
    records, cursor, items = checked_states[-1]
    assert {kind for kind, _, _ in records} == records_made
    assert cursor is not None and items > 0
    assert every_runs == {MAINTAIN_CONTEXT: TURNS, OFFLOAD_MEMORY: TURNS}
    assert 0 < checked_runs[MAINTAIN_CONTEXT] <= maintenance_runs
    assert 0 < checked_runs[OFFLOAD_MEMORY] <= TURNS / 2


async def group_chat(runtime: Runtime) -> list[tuple[list[tuple[str, int, int]], int | None, int]]:
    states = []
    for number in range(GROUP_MESSAGES):
        said = inbound(
            SAID[number % len(SAID)],
            user_id=f"u{number % 3}",
            display_name=("Ana", "Ben", "Cy")[number % 3],
            message_id=str(number),
            was_mentioned=number % ADDRESSED_EVERY == ADDRESSED_EVERY - 1,
            **GROUP,
        )
        if said.was_mentioned:
            assert (await runtime.engine.respond(said)).kind == "assistant"
        else:
            assert (await runtime.engine.record(said)).kind == "recorded"
        await runtime.engine.drain()
        states.append(stored_state(runtime))
    return states


@pytest.mark.parametrize("settings", [ROOMY, TIGHT], ids=["roomy", "tight"])
async def test_recorded_group_messages_enqueue_only_jobs_with_work_and_store_the_same(
    runtimes: RuntimeFactory, tmp_path: Path, settings: dict[str, object]
) -> None:
    (checked, checked_runs), (every, every_runs) = checked_and_every_job(runtimes, tmp_path, settings)

    checked_states = await group_chat(checked)
    assert checked_states == await group_chat(every)
    records, cursor, items = checked_states[-1]
    assert records and cursor is not None and items > 0
    assert every_runs == {MAINTAIN_CONTEXT: GROUP_MESSAGES, OFFLOAD_MEMORY: GROUP_MESSAGES}
    assert 0 < checked_runs[MAINTAIN_CONTEXT] < GROUP_MESSAGES
    assert 0 < checked_runs[OFFLOAD_MEMORY] <= GROUP_MESSAGES / 2


async def test_a_recorded_message_asks_for_maintenance_when_recall_could_change_what_it_finds(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False, **ROOMY)
    recorded = await runtime.engine.record(inbound("The launch moved to Friday.", **GROUP))
    session = runtime.stores.sessions.get_session(recorded.session_id)
    assert session is not None
    assembler = runtime.engine.assembler
    view = assembler.view(session.id)
    context, allowance = assembler.assemble_without_recall(session, runtime.engine.persona_for(session), view)
    # Its check recalls nothing, and allows for what recall may add.
    assert context.stats.tokens.recall == 0 and allowance > 0
    assert not runtime.context.has_work(session.id, view, context, allowance)
    # Recalled lines that could fill the budget could push the context past its shares.
    assert runtime.context.has_work(session.id, view, context, context.stats.budget_tokens or 0)


async def test_a_reply_with_nothing_due_enqueues_only_the_idle_timer(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    await runtime.engine.respond(inbound("hello"))
    with runtime.database.connect() as connection:
        names = connection.execute(text("SELECT name FROM jobs")).scalars().all()
    assert names == [FLUSH_IDLE_MEMORY]


async def test_the_offload_is_due_when_the_rows_a_turn_holds_do_not_reach_back_to_the_cursor(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False, memory_turns_threshold=3)
    reply = await runtime.engine.respond(inbound("one"))
    await runtime.engine.respond(inbound("two"))
    rows = runtime.stores.messages.rows_after(reply.session_id, 0)
    assert [row.seq for row in rows] == [1, 2, 3, 4]
    offloader = runtime.memory.offloader
    # Nothing offloaded yet: from seq 1 on, two replies are pending, one short of the trigger.
    assert not offloader.due_after(reply.session_id, rows)
    # Rows from seq 3 on leave seqs 1-2 unseen: what is pending is not known here.
    assert offloader.due_after(reply.session_id, rows[2:])


async def test_a_check_that_fails_stores_the_reply_with_every_job(
    runtimes: RuntimeFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)

    def broken(*_: object) -> bool:
        raise RuntimeError("the database went away")

    runtime.context.has_work = broken  # type: ignore[method-assign]
    reply = await runtime.engine.respond(inbound("hello"))
    assert reply.kind == "assistant" and reply.message_id is not None
    with runtime.database.connect() as connection:
        names = connection.execute(text("SELECT name FROM jobs ORDER BY name")).scalars().all()
    assert names == [MAINTAIN_CONTEXT, FLUSH_IDLE_MEMORY, OFFLOAD_MEMORY]
    assert "could not tell which after-turn jobs have work" in caplog.text
