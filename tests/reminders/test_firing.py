"""Firing: once per occurrence through the job system, late or missed after downtime, in the transcript."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import text

from bot.errors import DeliveryRefused
from bot.reminders.delivery import ReminderDelivery
from bot.runtime import Runtime
from bot.storage.models import utcnow
from bot.storage.reminders import job_key
from tests.support.peers import needs_postgres
from tests.support.runtime import RuntimeFactory, inbound

DEADLINE = 60.0


class CountingLane:
    """A lane's delivery end as the service sees it: it counts what it was handed."""

    def __init__(self, refusals: list[DeliveryRefused] | None = None) -> None:
        self.delivered: list[ReminderDelivery] = []
        self.refusals = list(refusals or [])

    async def deliver(self, delivery: ReminderDelivery) -> str | None:
        if self.refusals:
            raise self.refusals.pop(0)
        self.delivered.append(delivery)
        return f"platform-{len(self.delivered)}"


def reminder_state(runtime: Runtime) -> list[tuple[str, int, bool, str | None]]:
    with runtime.database.connect() as connection:
        rows = connection.execute(
            text("SELECT state, occurrence, late, failure FROM reminders ORDER BY id")
        ).all()
    return [(row.state, row.occurrence, bool(row.late), row.failure) for row in rows]


def reminder_rows(runtime: Runtime) -> list[tuple[str, str, str | None]]:
    with runtime.database.connect() as connection:
        rows = connection.execute(
            text("SELECT role, content, persona_id FROM messages WHERE kind = 'reminder' ORDER BY seq")
        ).all()
    return [(row.role, row.content, row.persona_id) for row in rows]


async def until(check, what: str) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    ends = loop.time() + DEADLINE
    while not check():
        assert loop.time() < ends, f"waited {DEADLINE:.0f} s for {what}"
        await asyncio.sleep(0.05)


async def test_a_due_reminder_is_delivered_once_and_the_next_turn_sees_it(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path)
    lane = CountingLane()
    runtime.reminders.lanes.register("telegram", lane)
    await runtime.engine.respond(inbound("hello", lane="telegram", chat_id="c1", thread_id="7"))
    await runtime.engine.respond(inbound("/remind 1s stretch", lane="telegram", chat_id="c1", thread_id="7"))
    await until(lambda: reminder_state(runtime) == [("delivered", 0, False, None)], "the delivery")
    [delivery] = lane.delivered
    assert (delivery.address.chat_id, delivery.address.thread_id, delivery.text) == ("c1", "7", "⏰ stretch")
    assert reminder_rows(runtime) == [("assistant", "⏰ stretch", "ada")]
    # The model reads it as the persona's message in the conversation's history.
    await runtime.engine.respond(inbound("thanks", lane="telegram", chat_id="c1", thread_id="7"))
    with runtime.database.connect() as connection:
        session_id = connection.execute(text("SELECT session_id FROM reminders")).scalar_one()
    session = runtime.stores.sessions.get_session(session_id)
    assert session is not None
    context = await runtime.engine.inspect(session)
    assert {"role": "assistant", "content": "⏰ stretch"}.items() <= next(
        message for message in context.messages if message.get("content") == "⏰ stretch"
    ).items()


async def test_two_processes_firing_the_same_occurrence_deliver_it_once(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    first = runtimes(tmp_path, jobs_worker=False)
    second = runtimes(tmp_path, jobs_worker=False)
    lanes = CountingLane(), CountingLane()
    first.reminders.lanes.register("telegram", lanes[0])
    second.reminders.lanes.register("telegram", lanes[1])
    await first.engine.respond(inbound("/remind 1h stretch", lane="telegram"))
    key = job_key(1)
    # Both runs of the job at once (a retry racing a late first run, say): one claim wins.
    await asyncio.gather(*(runtime.reminders.fire(key, 0) for runtime in (first, second, first, second)))
    assert len(lanes[0].delivered) + len(lanes[1].delivered) == 1
    assert reminder_rows(first) == [("assistant", "⏰ stretch", "ada")]
    # A later run of the same occurrence's job finds it delivered.
    await second.reminders.fire(key, 0)
    assert len(lanes[0].delivered) + len(lanes[1].delivered) == 1


async def test_due_while_down_is_delivered_late_and_long_ago_is_missed(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, reminders_max_late_seconds=3600)
    lane = CountingLane()
    runtime.reminders.lanes.register("web", lane)
    await runtime.engine.respond(inbound("/remind 1s soon"))
    await runtime.engine.respond(inbound("/remind 2s much later"))
    started = utcnow()
    clock: list[datetime] = [started + timedelta(minutes=10)]
    # Chorus was down: its job runs when it is back, ten minutes after the first fell due ...
    runtime.reminders.clock = lambda: clock[0]
    await until(lambda: reminder_state(runtime)[0][0] == "delivered", "the late delivery")
    # ... and two days after the second.
    clock[0] = started + timedelta(days=2)
    await until(lambda: reminder_state(runtime)[1][0] == "missed", "the missed reminder")
    assert reminder_state(runtime) == [("delivered", 0, True, None), ("missed", 0, True, None)]
    assert [delivery.text.splitlines()[0] for delivery in lane.delivered] == ["⏰ soon"]
    assert "late: this was due at" in lane.delivered[0].text
    listed = await runtime.engine.respond(inbound("/reminders"))
    assert "much later" in listed.text and "[missed]" in listed.text


async def test_a_refusing_platform_is_retried_then_the_reminder_fails_with_the_reason(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False, reminders_delivery_attempts=2)
    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    runtime.reminders._sleep = no_wait
    lane = CountingLane([DeliveryRefused("Too Many Requests", retry_after=7)])
    runtime.reminders.lanes.register("web", lane)
    await runtime.engine.respond(inbound("/remind 1h one"))
    await runtime.reminders.fire(job_key(1), 0)
    assert waits == [7] and len(lane.delivered) == 1
    lane.refusals = [DeliveryRefused("Forbidden: bot was blocked by the user", permanent=True)]
    await runtime.engine.respond(inbound("/remind 1h two"))
    await runtime.reminders.fire(job_key(2), 0)
    assert reminder_state(runtime)[1] == ("failed", 0, False, "Forbidden: bot was blocked by the user")


async def test_a_recurring_reminder_moves_to_its_next_firing(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    lane = CountingLane()
    runtime.reminders.lanes.register("web", lane)
    await runtime.engine.respond(inbound("/remind every day 08:00 standup"))
    with runtime.database.connect() as connection:
        due = connection.execute(text("SELECT due_at FROM reminders")).scalar_one()
    runtime.reminders.clock = lambda: datetime.fromisoformat(str(due)).replace(tzinfo=utcnow().tzinfo)
    await runtime.reminders.fire(job_key(1), 0)
    assert reminder_state(runtime) == [("scheduled", 1, False, None)]
    with runtime.database.connect() as connection:
        queued = connection.execute(
            text("SELECT session_id, seq FROM jobs WHERE name = 'reminder.fire'")
        ).all()
        later = connection.execute(text("SELECT due_at FROM reminders")).scalar_one()
    assert [tuple(row) for row in queued] == [("reminder:1", 0), ("reminder:1", 1)] or [
        tuple(row) for row in queued
    ] == [("reminder:1", 1)]
    assert str(later) > str(due)
    # The old occurrence's job, run again, delivers nothing more.
    await runtime.reminders.fire(job_key(1), 0)
    assert len(lane.delivered) == 1


@needs_postgres
async def test_on_postgresql_procrastinate_fires_each_reminder_once_across_two_processes(
    runtimes: RuntimeFactory, tmp_path: Path, postgres_url: str
) -> None:
    first = runtimes(tmp_path / "a", database_url=postgres_url)
    second = runtimes(tmp_path / "b", database_url=postgres_url)
    lanes = CountingLane(), CountingLane()
    first.reminders.lanes.register("web", lanes[0])
    second.reminders.lanes.register("web", lanes[1])
    await first.jobs.start()
    await second.jobs.start()
    # Two reminders of one conversation are independent jobs; both workers run the queue.
    await first.engine.respond(inbound("/remind 1s one"))
    await first.engine.respond(inbound("/remind 2s two"))
    await until(lambda: [s[0] for s in reminder_state(first)] == ["delivered", "delivered"], "both delivered")
    texts = sorted(d.text for lane in lanes for d in lane.delivered)
    assert texts == ["⏰ one", "⏰ two"]
    assert [row[1] for row in reminder_rows(first)] == ["⏰ one", "⏰ two"]


@needs_postgres
async def test_on_postgresql_a_reminder_is_shown_by_a_process_running_its_lane_not_by_a_worker(
    runtimes: RuntimeFactory, tmp_path: Path, postgres_url: str
) -> None:
    """`chorus worker` runs no lane: the reminder's job waits for a process that runs it, even
    one that runs no other job (`jobs.worker: false`)."""
    worker = runtimes(tmp_path / "worker", database_url=postgres_url)
    serve = runtimes(tmp_path / "serve", database_url=postgres_url, jobs_worker="false")
    lane = CountingLane()
    serve.reminders.lanes.register("telegram", lane)
    await worker.jobs.start()
    await serve.jobs.start(lanes=["telegram"])
    await serve.engine.respond(inbound("/remind 1s stretch", lane="telegram", chat_id="c1"))
    await until(lambda: reminder_state(serve)[0][0] not in ("scheduled", "delivering"), "the reminder's end")
    assert reminder_state(serve) == [("delivered", 0, False, None)]
    assert [delivery.text for delivery in lane.delivered] == ["⏰ stretch"]
